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
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rlbench.algos.registry import ALGORITHMS, get_algo
from rlbench.cli import train as train_cli
from rlbench.config import hyperparams
from rlbench.config.literals import LiteralError, parse_key_values
from rlbench.envs.make import check_env_id
from rlbench.errors import ConfigError
from rlbench.redact import redact_argv
from rlbench.run import compile_cache
from rlbench.run.experiment import MAX_SEED, RunRequest, check_log_folder, device_flag, split_device
from rlbench.run.launch import RunOutputs, Tracking
from rlbench.sweep.engine import SweepOptions, import_ray, run_sweep
from rlbench.sweep.final_eval import short_runs_note
from rlbench.sweep.grid import SweepSpec, check_name, default_name, parse_grid

SAVE_FREQ_FRACTION = 10  # by default a sweep checkpoints (with the replay buffer) every tenth of a run
# A sweep's runs at most: each is a run folder, a manifest entry and a Ray task, and the driver rewrites the
# whole manifest (about 300 bytes a run) at every start and finish, so 10,000 runs already make each rewrite
# 3 MB; a grid beyond that is several sweeps' work.
MAX_CELLS = 10_000


def build_parser() -> argparse.ArgumentParser:
    # The docstring's first paragraph, whole: its first line alone stops mid-sentence.
    p = argparse.ArgumentParser(prog="python -m rlbench.sweep", description=" ".join(__doc__.split("\n\n")[0].split()))
    grid = p.add_argument_group("the grid (what the results are)")
    grid.add_argument("--algos", nargs="+", default=["sac"], help=f"of {', '.join(ALGORITHMS)}")
    grid.add_argument("--envs", nargs="+", default=["Pendulum-v1"], help="gymnasium env ids")
    seeds = grid.add_mutually_exclusive_group()
    seeds.add_argument("--seeds", type=int, default=3, metavar="N", help="seeds 1..N (default 3)")
    seeds.add_argument("--seed-list", type=int, nargs="+", default=None, metavar="SEED", help="these seeds")
    grid.add_argument("-n", "--n-timesteps", type=int, default=-1, help="env steps per run (default: the file's)")
    grid.add_argument(
        "-params", "--hyperparams", nargs="+", default=[], metavar="KEY:VALUE", help="as train.py's, for every run"
    )
    grid.add_argument(
        "--params-for",
        nargs="+",
        action="append",
        default=[],
        metavar=("ALGO", "KEY:VALUE"),
        help="overrides for one algorithm's runs, after -params (repeat per algorithm)",
    )
    grid.add_argument(
        "--grid",
        nargs="+",
        default=[],
        metavar="KEY:V1,V2",
        help="a settings axis, e.g. policy_delay:1,3 (each value a -params value; lists in brackets)",
    )
    grid.add_argument("-conf", "--conf-file", default=None, help="hyperparameter file (default hyperparams/<algo>.yml)")
    grid.add_argument("--eval-freq", type=int, default=10_000, help="evaluate every n env steps (default 10000)")
    grid.add_argument("--eval-episodes", type=int, default=5, help="episodes per evaluation")
    run = p.add_argument_group("where and how")
    run.add_argument("-f", "--log-folder", type=Path, default=Path("logs"), help="the log root (runs: <f>/<algo>/)")
    run.add_argument("--name", default=None, help="the sweep's name (default <algos>_<envs>): <f>/sweeps/<name>/")
    run.add_argument(
        "--address",
        default=None,
        help="a running Ray cluster: auto or HOST:PORT (default: a private Ray instance on this machine)",
    )
    run.add_argument("--max-retries", type=int, default=2, help="retries of a cell whose process or node died")
    run.add_argument(
        "--no-shared-fs",
        action="store_true",
        help="the nodes do not share the log root: finished runs come back through Ray, a retried cell "
        "starts from scratch",
    )
    run.add_argument("--retry-failed", action="store_true", help="run the cells that failed earlier again")
    run.add_argument("--seeds-per-process", type=int, default=None, metavar="K", help="vmapped seeds per process")
    run.add_argument("--cpus-per-run", type=float, default=None, help="CPUs per process (default 1)")
    run.add_argument("--gpus-per-run", type=float, default=None, help="GPUs per process (default 0.25 on GPU nodes)")
    run.add_argument(
        "--device",
        default="auto",
        type=device_flag,
        help="as train.py's; gpu:N runs every process on this machine's N-th GPU (without --address)",
    )
    run.add_argument(
        "--save-freq",
        type=int,
        default=None,
        help=f"checkpoint every n env steps, with the replay buffer (default a {SAVE_FREQ_FRACTION}th of the "
        "run; < 0: never, and an interrupted cell starts over)",
    )
    run.add_argument("--at-steps", type=int, default=100_000, help="the report's second table: returns at n steps")
    run.add_argument("--no-report", action="store_true", help="skip the report (and matplotlib)")
    run.add_argument("--compile-cache", default=None, metavar="DIR|none", help="as train.py's, on every node")
    track = p.add_argument_group("tracking")
    train_cli.add_bool_flag(track, "--track", help="track every run on W&B, grouped by the sweep's name")
    track.add_argument("--wandb-project-name", default="sb3", help="W&B project")
    track.add_argument("--wandb-entity", default=None, help="W&B entity")
    track.add_argument("-tags", "--wandb-tags", nargs="+", default=[], help="W&B tags")
    return p


def spec_from_args(args: argparse.Namespace) -> SweepSpec:
    """The grid, every name and number checked (ConfigError naming the flag), before anything is written."""
    algos = tuple(dict.fromkeys(args.algos))
    for algo in algos:
        get_algo(algo)
    envs = tuple(dict.fromkeys(args.envs))
    for env in envs:
        check_env_id(env)
    check_seed_count(args)  # before the seeds are built: `--seeds 5000000000` is a tuple of 40 GB
    seeds = tuple(dict.fromkeys(args.seed_list)) if args.seed_list is not None else tuple(range(1, args.seeds + 1))
    for flag, value, lowest in (
        ("--eval-freq", args.eval_freq, 1),
        ("--eval-episodes", args.eval_episodes, 1),
        ("--max-retries", args.max_retries, 0),
        ("--at-steps", args.at_steps, 1),
        ("--seed-list", min(seeds, default=0), 0),
    ):
        if value < lowest:
            raise ConfigError(f"{flag}: expected an integer >= {lowest}, got {value}")
    if max(seeds) > MAX_SEED:
        raise ConfigError(f"--seed-list: seeds go up to {MAX_SEED}, got {max(seeds)}")
    if args.n_timesteps == 0 or args.n_timesteps < -1:
        raise ConfigError(f"-n: expected a positive number of env steps, got {args.n_timesteps}")
    params_for: dict[str, tuple[str, ...]] = {}
    for algo, *tokens in args.params_for:
        if algo not in algos:
            raise ConfigError(f"--params-for {algo}: not one of --algos ({', '.join(algos)})")
        if not tokens:
            raise ConfigError(f"--params-for {algo}: expected KEY:VALUE overrides after the algorithm")
        params_for[algo] = params_for.get(algo, ()) + tuple(tokens)
    try:  # the syntax of every value now; whether an algorithm accepts it is each cell's own check
        parse_key_values(list(args.hyperparams), "-params")
        for algo, tokens in params_for.items():
            parse_key_values(list(tokens), f"--params-for {algo}")
        axes = parse_grid(args.grid)
        for key, values in axes:
            for value in values:
                parse_key_values([f"{key}:{value}"], "--grid")
    except LiteralError as error:
        raise ConfigError(str(error)) from None
    check_cell_count(len(algos) * len(envs) * math.prod(len(values) for _, values in axes) * len(seeds))
    if args.address is not None and split_device(args.device)[1] is not None:
        raise ConfigError(
            f"--device {args.device}: on a cluster Ray gives each process its GPUs; use --device gpu (with "
            "--gpus-per-run), or leave --address out to run every process on this machine's GPU"
        )
    check_log_folder(str(args.log_folder))  # train.py's check: `-f` naming a file is one line, not a traceback
    name = check_name(args.name) if args.name is not None else default_name(algos, envs)
    # Keyed by the name the user gave, or the shipped file's name in the repository: the same command from
    # another checkout finds the same sweep, unless the file's content differs there.
    if args.conf_file:
        hashes = ((args.conf_file, file_hash(Path(args.conf_file))),)
    else:
        hashes = tuple((f"hyperparams/{algo}.yml", file_hash(hyperparams.default_file(algo))) for algo in algos)
    return SweepSpec(
        name=name,
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
        file_hashes=hashes,
    )


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
        spec = spec_from_args(args)
        if args.track:
            train_cli.import_wandb()
        if not args.no_report:
            from rlbench.report import plots

            plots.import_plot_packages()  # the report's curves: before hours of training, not after
        for flag, value in (("--seeds-per-process", args.seeds_per_process),):
            if value is not None and value < 1:
                raise ConfigError(f"{flag}: expected an integer >= 1, got {value}")
    except ConfigError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    tracking = None
    if args.track:
        tracking = Tracking(args.wandb_project_name, args.wandb_entity, spec.name, tuple(args.wandb_tags))
    frequency = save_freq(args, spec)
    outputs = RunOutputs(
        log_folder=str(args.log_folder),
        save_freq=frequency,
        keep_checkpoints=1,
        save_replay_buffer=frequency > 0,
        tracking=tracking,
        verbose=1,
    )
    request = cell_template(args)
    options = SweepOptions(
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
    command = shlex.join(["python", "-m", "rlbench.sweep", *redact_argv(argv)])
    try:
        return run_sweep(spec, options, request, outputs, record_args, command)
    except ConfigError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
