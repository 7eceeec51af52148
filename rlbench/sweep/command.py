"""`python -m rlbench.sweep` (`rlbench-sweep`): a grid of train.py runs (algos x envs x settings x seeds) on
Ray, on this machine or a cluster, resumable, with a returns report at the end.

    python -m rlbench.sweep --algos sac crossq --envs HalfCheetah-v4 --seeds 5 -n 100000
    python -m rlbench.sweep --algos crossq --envs Hopper-v4 --grid policy_delay:1,3 --seeds 3 --address auto

Every cell is an ordinary run folder (`<log>/<algo>/<env>_<N>`, as train.py writes it), recorded in the
manifest `<log>/sweeps/<name>/manifest.json`; the same command again skips finished cells and continues
interrupted ones. Exit codes: 0 every cell finished; 1 a cell failed; 2 bad input (nothing written);
75 stopped by Ctrl-C or SIGTERM (checkpoints written: run the same command again); 130 aborted.
"""

from __future__ import annotations

import argparse
import hashlib
import math
import shlex
import sys
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rlbench.cli import train as train_cli
from rlbench.cli.flags import Group, flag, parser_from, seeds_group, shared
from rlbench.config import hyperparams
from rlbench.config.literals import LiteralError, parse_key_values
from rlbench.config.registry import get_algo
from rlbench.envs.checks import check_env_id
from rlbench.errors import ConfigError, RunFailure
from rlbench.redact import redact_argv
from rlbench.run import compile_cache
from rlbench.run.device import split_device
from rlbench.run.exit_codes import exit_code
from rlbench.run.experiment import MAX_SEED, RunRequest
from rlbench.run.outputs import RunOutputs, Tracking
from rlbench.run.probe import check_log_folder
from rlbench.sweep.engine import import_ray, run_sweep
from rlbench.sweep.final_eval import short_runs_note
from rlbench.sweep.grid import SweepSpec, check_learner_values, check_name, default_name, parse_grid
from rlbench.sweep.options import SweepOptions

SAVE_FREQ_FRACTION = 10  # by default a sweep checkpoints (with the replay buffer) every tenth of a run
# A sweep's runs at most: each is a run folder, a manifest entry and a Ray task, and the driver rewrites the
# whole manifest (about 300 bytes a run) at every start and finish, so 10,000 runs already make each rewrite
# 3 MB; a grid beyond that is several sweeps' work.
MAX_CELLS = 10_000


# The grid (what the results are), where and how it runs, and its tracking: `python -m rlbench.sweep`'s flags.
GRID_FLAGS = (
    shared("algos"),
    shared("envs"),
    seeds_group(metavar="N"),
    shared("n_timesteps", help="env steps per run (default: the file's)"),
    shared("hyperparams", help="as train.py's, for every run"),
    shared("params_for"),
    flag(
        "--grid",
        nargs="+",
        default=[],
        metavar="KEY:V1,V2",
        help="a settings axis, e.g. policy_delay:1,3 (each value a -params value; lists in brackets)",
    ),
    shared("conf_file", help="hyperparameter file (default hyperparams/<algo>.yml)"),
    shared("eval_freq", default=10_000, help="evaluate every n env steps (default 10000)"),
    shared("eval_episodes"),
)
RUN_FLAGS = (
    shared("log_folder", type=Path, default=Path("logs"), help="the log root (runs: <f>/<algo>/)"),
    flag("--name", default=None, help="the sweep's name (default <algos>_<envs>): <f>/sweeps/<name>/"),
    shared("address"),
    flag("--max-retries", type=int, default=2, help="retries of a cell whose process or node died"),
    flag(
        "--no-shared-fs",
        action="store_true",
        help="the nodes do not share the log root: finished runs come back through Ray, a retried cell "
        "starts from scratch",
    ),
    flag("--retry-failed", action="store_true", help="run the cells that failed earlier again"),
    flag("--seeds-per-process", type=int, default=None, metavar="K", help="vmapped seeds per process"),
    flag("--cpus-per-run", type=float, default=None, help="CPUs per process (default 1)"),
    flag("--gpus-per-run", type=float, default=None, help="GPUs per process (default 0.25 on GPU nodes)"),
    shared("device", help="as train.py's; gpu:N runs every process on this machine's N-th GPU (without --address)"),
    flag(
        "--save-freq",
        type=int,
        default=None,
        help=f"checkpoint every n env steps, with the replay buffer (default a {SAVE_FREQ_FRACTION}th of the "
        "run; < 0: never, and an interrupted cell starts over)",
    ),
    shared("at_steps"),
    flag("--no-report", action="store_true", help="skip the report (and matplotlib)"),
    shared("compile_cache", help="as train.py's, on every node"),
)
TRACKING_FLAGS = (
    shared("track", help="track every run on W&B, grouped by the sweep's name"),
    shared("wandb_project_name"),
    shared("wandb_entity", help="W&B entity"),
    shared("wandb_tags"),
)


def build_parser() -> argparse.ArgumentParser:
    # The docstring's first paragraph, whole: its first line alone stops mid-sentence.
    table = (
        Group(GRID_FLAGS, "the grid (what the results are)"),
        Group(RUN_FLAGS, "where and how"),
        Group(TRACKING_FLAGS, "tracking"),
    )
    return parser_from(table, prog="python -m rlbench.sweep", description=" ".join(__doc__.split("\n\n")[0].split()))


def spec_from_args(args: argparse.Namespace) -> SweepSpec:
    """The grid, every name and number checked (ConfigError naming the flag), before anything is written."""
    algos = tuple(dict.fromkeys(args.algos))
    for algo in algos:
        get_algo(algo)
    envs = tuple(dict.fromkeys(args.envs))
    for env in envs:
        check_env_id(env)
    seeds = seeds_from_args(args)
    if args.n_timesteps == 0 or args.n_timesteps < -1:
        raise ConfigError(f"-n: expected a positive number of env steps, got {args.n_timesteps}")
    params_for = params_for_from_args(args, algos)
    axes = check_values(args, params_for)
    check_cell_count(len(algos) * len(envs) * math.prod(len(values) for _, values in axes) * len(seeds))
    if args.address is not None and split_device(args.device)[1] is not None:
        raise ConfigError(
            f"--device {args.device}: on a cluster Ray gives each process its GPUs; use --device gpu (with "
            "--gpus-per-run), or leave --address out to run every process on this machine's GPU"
        )
    check_log_folder(str(args.log_folder))  # train.py's check: `-f` naming a file is one line, not a traceback
    return SweepSpec(
        name=check_name(args.name) if args.name is not None else default_name(algos, envs),
        algos=algos,
        envs=envs,
        seeds=seeds,
        n_timesteps=args.n_timesteps,
        params=tuple(args.hyperparams),
        params_for=tuple(params_for.items()),
        grid=axes,
        conf_file=args.conf_file,
        eval_freq=args.eval_freq,
        eval_episodes=args.eval_episodes,
        file_hashes=conf_hashes(args.conf_file, algos),
    )


def seeds_from_args(args: argparse.Namespace) -> tuple[int, ...]:
    """--seeds N (1..N) or --seed-list, with the counts and numbers the grid needs checked."""
    check_seed_count(args)  # before the seeds are built: `--seeds 5000000000` is a tuple of 40 GB
    seeds = tuple(args.seed_list) if args.seed_list is not None else tuple(range(1, args.seeds + 1))
    repeated = sorted(seed for seed, count in Counter(seeds).items() if count > 1)
    if repeated:  # one run per seed: a repeat would be dropped, the sweep smaller than the command says
        raise ConfigError(
            f"--seed-list: seed{'s' if len(repeated) > 1 else ''} {', '.join(map(str, repeated))} given more than "
            "once; give each seed once (each seed is one run of every cell)"
        )
    for name, value, lowest in (
        ("--eval-freq", args.eval_freq, 1),
        ("--eval-episodes", args.eval_episodes, 1),
        ("--max-retries", args.max_retries, 0),
        ("--at-steps", args.at_steps, 1),
        ("--seed-list", min(seeds, default=0), 0),
    ):
        if value < lowest:
            raise ConfigError(f"{name}: expected an integer >= {lowest}, got {value}")
    if max(seeds) > MAX_SEED:
        raise ConfigError(f"--seed-list: seeds go up to {MAX_SEED}, got {max(seeds)}")
    return seeds


def params_for_from_args(args: argparse.Namespace, algos: tuple[str, ...]) -> dict[str, tuple[str, ...]]:
    """--params-for ALGO KEY:VALUE... (repeatable), gathered per algorithm, each one of --algos."""
    params_for: dict[str, tuple[str, ...]] = {}
    for algo, *tokens in args.params_for:
        if algo not in algos:
            raise ConfigError(f"--params-for {algo}: not one of --algos ({', '.join(algos)})")
        if not tokens:
            raise ConfigError(f"--params-for {algo}: expected KEY:VALUE overrides after the algorithm")
        params_for[algo] = params_for.get(algo, ()) + tuple(tokens)
    return params_for


def check_values(
    args: argparse.Namespace, params_for: dict[str, tuple[str, ...]]
) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """The syntax of every -params, --params-for and --grid value now, and each --grid value of a learner key
    as each algorithm reads it (the rest, with the env's entry, is each cell's own check); the --grid axes."""
    try:
        parse_key_values(list(args.hyperparams), "-params")
        for algo, tokens in params_for.items():
            parse_key_values(list(tokens), f"--params-for {algo}")
        axes = parse_grid(args.grid)
        check_learner_values(tuple(dict.fromkeys(args.algos)), axes)
    except LiteralError as error:
        raise ConfigError(str(error)) from None
    return axes


def conf_hashes(conf_file: str | None, algos: tuple[str, ...]) -> tuple[tuple[str, str], ...]:
    """The hyperparameter files' hashes, keyed by the name the user gave, or the shipped file's name in the
    repository: the same command from another checkout finds the same sweep, unless the file's content
    differs there."""
    if conf_file:
        return ((conf_file, file_hash(Path(conf_file))),)
    return tuple((f"hyperparams/{algo}.yml", file_hash(hyperparams.default_file(algo))) for algo in algos)


def check_seed_count(args: argparse.Namespace) -> None:
    if args.seed_list is None and args.seeds < 1:
        raise ConfigError(f"--seeds: expected an integer >= 1, got {args.seeds}")
    count = len(args.seed_list) if args.seed_list is not None else args.seeds
    if count > MAX_CELLS:
        flag = "--seed-list" if args.seed_list is not None else "--seeds"
        raise ConfigError(f"{flag}: at most {MAX_CELLS} seeds (a sweep has at most {MAX_CELLS} runs), got {count}")


def check_cell_count(n_cells: int) -> None:
    """The grid's size, counted before any cell is built."""
    if n_cells > MAX_CELLS:
        raise ConfigError(
            f"the grid has {n_cells} runs (algos x envs x --grid settings x seeds), more than a sweep's "
            f"{MAX_CELLS}: split it into several sweeps (--name)"
        )


def file_hash(path: Path) -> str:
    """The file's sha256 (an edited hyperparameter file changes the grid); a module's name as it is."""
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        if path.suffix in (".yml", ".yaml", ".py"):
            raise ConfigError(f"-conf: hyperparameter file not found: {path}") from None
        return f"module {path}"


def save_freq(args: argparse.Namespace, spec: SweepSpec) -> int:
    if args.save_freq is not None:
        return args.save_freq
    if spec.n_timesteps > 0:
        return max(1_000, spec.n_timesteps // SAVE_FREQ_FRACTION)
    return 100_000  # the files' lengths (10^5 to 10^6 steps): at most ten checkpoints, at least one per 100k


def record_args(request: RunRequest, outputs: RunOutputs) -> tuple[dict[str, Any], str]:
    """What train.py records for this run (args.yml, command.txt): the run spelled as train.py flags, parsed
    by train.py's own parser, so args.yml has every flag with train.py's defaults and command.txt reruns it."""
    argv = ["--algo", request.algo, "--env", request.env, "--seed", str(request.seed)]
    if request.n_seeds and request.n_seeds > 1:
        argv += ["--n-seeds", str(request.n_seeds)]
    if request.n_timesteps != -1:
        argv += ["-n", str(request.n_timesteps)]
    if request.conf_file:
        argv += ["-conf", request.conf_file]
    if request.params:
        argv += ["-params", *request.params]
    argv += ["--eval-freq", str(request.eval_freq), "--eval-episodes", str(request.eval_episodes)]
    argv += ["-f", str(outputs.log_folder), "--device", request.device]
    if request.num_threads != -1:
        argv += ["--num-threads", str(request.num_threads)]
    if outputs.save_freq > 0:
        argv += ["--save-freq", str(outputs.save_freq), "--keep-checkpoints", str(outputs.keep_checkpoints)]
    if outputs.save_replay_buffer:
        argv.append("--save-replay-buffer")
    if outputs.tracking is not None:
        t = outputs.tracking
        argv += ["--track", "--wandb-project-name", t.project, "--wandb-group", str(t.group)]
        argv += ["--wandb-entity", t.entity] if t.entity else []
        argv += ["-tags", *t.tags] if t.tags else []
    args = train_cli.build_parser().parse_args(argv)
    return vars(args), train_cli.command_line(argv)


def cell_template(args: argparse.Namespace) -> RunRequest:
    """Every cell's request before its algo, env, seeds and params are filled in per task."""
    conf_file = args.conf_file
    if conf_file and Path(conf_file).suffix in (".yml", ".yaml", ".py"):
        conf_file = str(Path(conf_file).resolve())  # workers do not share the driver's working folder
    return RunRequest(
        conf_file=conf_file,
        n_timesteps=args.n_timesteps,
        eval_freq=args.eval_freq,
        eval_episodes=args.eval_episodes,
        device=args.device,
        log_interval=-1,
    )


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = build_parser().parse_args(argv)
    try:
        import_ray()
        cache = compile_cache.enable(args.compile_cache)
        spec = check_args(args)
        options = sweep_options(args, spec, cache)
        command = shlex.join(["python", "-m", "rlbench.sweep", *redact_argv(argv)])
        return run_sweep(spec, options, cell_template(args), cell_outputs(args, spec), record_args, command)
    except (ConfigError, RunFailure) as error:  # RunFailure: the private Ray instance did not start
        return exit_code(error)


def check_args(args: argparse.Namespace) -> SweepSpec:
    """The grid and what it needs (W&B, the report's plotting packages), before hours of training, not after."""
    spec = spec_from_args(args)
    if args.track:
        train_cli.import_wandb()
    if not args.no_report:
        from rlbench.report import plots

        plots.import_plot_packages()
    if args.seeds_per_process is not None and args.seeds_per_process < 1:
        raise ConfigError(f"--seeds-per-process: expected an integer >= 1, got {args.seeds_per_process}")
    return spec


def cell_outputs(args: argparse.Namespace, spec: SweepSpec) -> RunOutputs:
    """What every cell writes: checkpoints with the replay buffer (a continuation is bit-exact), W&B runs
    grouped by the sweep's name."""
    tracking = None
    if args.track:
        tracking = Tracking(args.wandb_project_name, args.wandb_entity, spec.name, tuple(args.wandb_tags))
    frequency = save_freq(args, spec)
    return RunOutputs(
        log_folder=str(args.log_folder),
        save_freq=frequency,
        keep_checkpoints=1,
        save_replay_buffer=frequency > 0,
        tracking=tracking,
        verbose=1,
    )


def sweep_options(args: argparse.Namespace, spec: SweepSpec, cache: Path | None) -> SweepOptions:
    return SweepOptions(
        log_root=args.log_folder,
        address=args.address,
        max_retries=args.max_retries,
        shared_fs=not args.no_shared_fs,
        seeds_per_process=args.seeds_per_process,
        cpus_per_run=args.cpus_per_run,
        gpus_per_run=args.gpus_per_run,
        retry_failed=args.retry_failed,
        compile_cache=str(cache) if cache is not None else compile_cache.OFF,
        at_steps=args.at_steps,
        report=not args.no_report,
        notes=(compile_cache.describe(cache), *filter(None, [short_runs_note(spec)])),
    )
