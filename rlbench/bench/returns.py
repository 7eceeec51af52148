"""Sample-efficiency benchmark: train a grid of runs, then report returns beside published ones
(`python -m rlbench.bench returns`).

The grid is algo x env x seed. Each cell is one ordinary `train.py` run (called in-process) with the
algorithm's hyperparameter file entry for the env, trained in `<log>/.partial/<algo>/<env>_<seed>/` and
moved to `<log>/<algo>/<env>_<seed>/` (RL Zoo layout, N = seed) once finished, after `bench_done.json`
(the cell's resolved settings) is written into it. So a folder under `<log>/<algo>/` is always a
complete run of the settings it records: a rerun skips it, and a rerun with other settings (-n,
-params, evaluation, an edited hyperparameter file) is refused instead of mixing results. A run
stopped by Ctrl-C or SIGTERM leaves train.py's interrupt checkpoint (replay buffer included) in its
staging folder, and the next invocation continues it with `train.py -i`; anything else found there is
redone from scratch. With --seeds-per-run K, up to K consecutive seeds of one algo and env train as one
`train.py --n-seeds` run (staged in `<log>/.partial/<algo>/<env>_<first>-<last>/`), each seed's run
folder moved to its own cell. Since cells share nothing but the log folder, several invocations can train disjoint
parts of one grid at once, and `--report-only` reports whatever has finished.

The report gives, per env and algo over seeds, the mean, the interquartile mean (IQM: the mean of the
middle half, Agarwal et al. 2021) and a 95% percentile-bootstrap interval of the mean, of (a) the final
evaluation return and (b) the evaluation return at `--at-steps` env steps (the last evaluation at or
below it), beside the published numbers in REFERENCES, with learning curves drawn by rlbench.plots.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from rlbench import plots
from rlbench.bench.report import REFERENCES, machine_line
from rlbench.bench.report import write_report as write_returns_report
from rlbench.checkpoint import CheckpointError, newest_valid_checkpoint, read_checkpoint
from rlbench.checkpoint_schema import resume_expectations
from rlbench.cli import train as train_cli
from rlbench.envs.make import check_env_id
from rlbench.errors import ConfigError
from rlbench.experiment import resolve
from rlbench.files import atomic_write_text
from rlbench.launch import EXIT_INTERRUPTED, latest_run_id
from rlbench.registry import ALGORITHMS, get_algo

DEFAULT_LOG_FOLDER = Path("logs/bench_returns")
DEFAULT_OUTPUT = Path("benchmarks/returns.md")
DONE_FILE = "bench_done.json"  # in a finished run folder: the settings it was trained with
CELL_FILE = "bench_cell.json"  # in a staging folder: the settings of the run in progress
PARTIAL = ".partial"
EXIT_STOPPED = (EXIT_INTERRUPTED, 130)  # train.py stopped by a signal: stop the grid too


@dataclass(frozen=True)
class Cell:
    """One run of the grid; its folders are fixed by (algo, env, seed), the rest lives in its settings."""

    algo: str
    env: str
    seed: int

    @property
    def name(self) -> str:
        return f"{self.env.replace(':', '_')}_{self.seed}"

    def folder(self, log: Path) -> Path:
        return log / self.algo / self.name

    def staging(self, log: Path) -> Path:
        return log / PARTIAL / self.algo / self.name


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m rlbench.bench returns", description=__doc__.splitlines()[0])
    p.add_argument("--algos", nargs="+", default=["sac", "crossq", "droq"], help=f"of {', '.join(ALGORITHMS)}")
    p.add_argument("--envs", nargs="+", default=["HalfCheetah-v4", "Hopper-v4"], help="gymnasium env ids")
    seeds = p.add_mutually_exclusive_group()
    seeds.add_argument("--seeds", type=int, default=3, help="seeds 1..N (default 3)")
    seeds.add_argument("--seed-list", type=int, nargs="+", default=None, metavar="SEED", help="these seeds")
    p.add_argument(
        "-n",
        "--n-timesteps",
        type=int,
        default=-1,
        help="env steps per run (default: the hyperparameter file's n_timesteps)",
    )
    p.add_argument("-f", "--log-folder", type=Path, default=DEFAULT_LOG_FOLDER, help="runs go to <folder>/<algo>/")
    p.add_argument("--eval-freq", type=int, default=10_000, help="evaluate every n env steps")
    p.add_argument("--eval-episodes", type=int, default=5, help="episodes per evaluation")
    p.add_argument(
        "--at-steps",
        type=int,
        default=100_000,
        help="the second table: returns at this many env steps (the last evaluation at or below)",
    )
    p.add_argument("--output", type=Path, default=DEFAULT_OUTPUT, help="the markdown report; PNGs go beside it")
    p.add_argument(
        "-params",
        "--hyperparams",
        nargs="+",
        default=[],
        metavar="KEY:VALUE",
        help="hyperparameter overrides for every run, as train.py's -params",
    )
    p.add_argument(
        "--params-for",
        nargs="+",
        action="append",
        default=[],
        metavar=("ALGO", "KEY:VALUE"),
        help="overrides for one algorithm's runs, applied after -params (repeat per algorithm), e.g. "
        "--params-for crossq precision:bfloat16",
    )
    p.add_argument(
        "--report-only",
        action="store_true",
        help="train nothing: write the report from the grid's finished runs (e.g. while other "
        "invocations are still training the rest of it into the same -f)",
    )
    p.add_argument(
        "--seeds-per-run",
        type=int,
        default=1,
        metavar="K",
        help="train up to K consecutive seeds of an algo and env in one train.py run (--n-seeds K: one vmapped "
        "learner, the fast way on a GPU); each seed still gets its own run folder",
    )
    p.add_argument("--device", default="auto", choices=("auto", "cpu", "gpu", "cuda"), help="as train.py's")
    p.add_argument("--verbose", type=int, default=0, choices=(0, 1, 2), help="train.py's verbosity")
    p.add_argument("-P", "--progress", action="store_true", help="train.py's progress bar")
    return p


def _unique(values: Sequence[Any]) -> list[Any]:
    return list(dict.fromkeys(values))


def check_args(args: argparse.Namespace) -> list[Cell]:
    """The grid, after checking the names and numbers (ConfigError naming the bad value)."""
    for algo in args.algos:
        get_algo(algo)
    for algo, *tokens in args.params_for:
        if algo not in args.algos:
            raise ConfigError(f"--params-for {algo}: not one of --algos ({', '.join(_unique(args.algos))})")
        if not tokens:
            raise ConfigError(f"--params-for {algo}: expected KEY:VALUE overrides after the algorithm")
    for env in args.envs:
        try:
            check_env_id(env)
        except ConfigError as error:
            known = ", ".join(_unique(env for env, _ in REFERENCES))
            raise ConfigError(
                f"{error} (valid: any registered gymnasium id; with published references: {known})"
            ) from None
    seeds = _unique(args.seed_list) if args.seed_list is not None else list(range(1, args.seeds + 1))
    checks = [
        ("--seeds", args.seeds, 1),
        ("--eval-freq", args.eval_freq, 1),
        ("--eval-episodes", args.eval_episodes, 1),
        ("--at-steps", args.at_steps, 1),
        ("--seeds-per-run", args.seeds_per_run, 1),
        ("--seed-list", min(seeds, default=0), 0),
    ]
    for name, value, lowest in checks:
        if value < lowest:
            raise ConfigError(f"{name}: expected an integer >= {lowest}, got {value}")
    return [Cell(algo, env, seed) for algo in _unique(args.algos) for env in _unique(args.envs) for seed in seeds]


def algo_params(algo: str, args: argparse.Namespace) -> list[str]:
    """The -params tokens of `algo`'s runs: -params, then its --params-for, which win on shared keys."""
    own = [token for name, *tokens in args.params_for if name == algo for token in tokens]
    own_keys = {token.partition(":")[0].strip() for token in own}
    return [token for token in args.hyperparams if token.partition(":")[0].strip() not in own_keys] + own


def train_argv(
    cell: Cell, args: argparse.Namespace, log_folder: Path, n_timesteps: int, with_params: bool = True
) -> list[str]:
    argv = [
        "--algo",
        cell.algo,
        "--env",
        cell.env,
        "--seed",
        str(cell.seed),
        "-f",
        str(log_folder),
        "--eval-freq",
        str(args.eval_freq),
        "--eval-episodes",
        str(args.eval_episodes),
        "--device",
        args.device,
        "--verbose",
        str(args.verbose),
    ]
    if n_timesteps != -1:
        argv += ["-n", str(n_timesteps)]
    if args.progress:
        argv.append("-P")
    params = algo_params(cell.algo, args)
    if params and with_params:
        argv += ["-params", *params]
    return argv


def resolve_settings(cells: list[Cell], args: argparse.Namespace) -> dict[Cell, dict[str, Any]]:
    """Each cell's settings as train.py resolves them (file entry < -params < -n), checked before any
    file is written. Equal settings mean the same run; they are what bench_done.json records."""
    resolved: dict[tuple[str, str], dict[str, Any]] = {}
    for algo, env in _unique((c.algo, c.env) for c in cells):
        train_args = train_cli.build_parser().parse_args(train_argv(Cell(algo, env, 0), args, Path(), args.n_timesteps))
        try:
            exp = resolve(train_cli.request_from_args(train_args))
        except ConfigError as error:
            raise ConfigError(f"--algo {algo} --env {env}: {error}") from None
        resolved[(algo, env)] = {
            "n_timesteps": exp.run.n_timesteps,
            "eval_freq": args.eval_freq,
            "eval_episodes": args.eval_episodes,
            "hyperparams": exp.hyperparams,
        }
    return {c: _json_plain({"algo": c.algo, "env": c.env, "seed": c.seed, **resolved[(c.algo, c.env)]}) for c in cells}


def _json_plain(value: Any) -> Any:
    """As it reads back from JSON (tuples become lists), so settings compare equal to recorded ones."""
    return json.loads(json.dumps(value, sort_keys=True))


def _differences(recorded: Mapping[str, Any], wanted: Mapping[str, Any]) -> list[str]:
    """`key: old there, new now` for each setting that differs (hyperparameters by their own names)."""

    def flat(settings: Mapping[str, Any]) -> dict[str, Any]:
        top = {k: v for k, v in settings.items() if k != "hyperparams"}
        return top | {k: v for k, v in settings.get("hyperparams", {}).items() if k not in top}

    old, new = flat(recorded), flat(wanted)
    return [
        f"{key}: {old.get(key)!r} there, {new.get(key)!r} now"
        for key in dict.fromkeys([*old, *new])
        if old.get(key) != new.get(key)
    ]


def is_finished(cell: Cell, settings: Mapping[str, Any], log: Path) -> bool:
    """True for a finished run of these settings; ConfigError for a folder that is something else."""
    folder = cell.folder(log)
    if not folder.exists():
        return False
    done = folder / DONE_FILE
    if not done.is_file() or not (folder / "evaluations.npz").is_file():
        raise ConfigError(
            f"{folder} exists but is not a finished run of this benchmark (no {DONE_FILE} or "
            "evaluations.npz); move it away or choose another -f"
        )
    try:
        recorded = json.loads(done.read_text())["settings"]
    except (ValueError, KeyError, TypeError) as error:
        raise ConfigError(f"{done}: unreadable ({error}); move the run away or choose another -f") from None
    if recorded != settings:
        changes = "; ".join(_differences(recorded, settings)[:5])
        raise ConfigError(
            f"{folder} was trained with other settings ({changes}); use another -f for these "
            "settings, or move the run away to train it again"
        )
    return True


def resumable_checkpoint(staging: Path, record: Any, algo: str, n_timesteps: int) -> tuple[Path, int] | None:
    """The newest valid checkpoint with a replay buffer left by an interrupted run of these settings
    (`record`, as the staging folder records them), and its env steps; None when there is none (the run
    is then redone from scratch)."""
    try:
        if json.loads((staging / CELL_FILE).read_text()) != record:
            return None
    except (OSError, ValueError):
        return None
    found = []
    for run_dir in staging.glob(f"{algo}/*"):
        path = newest_valid_checkpoint(run_dir)
        if path is None:
            continue
        try:
            manifest = read_checkpoint(path, load_replay_buffer=False, expect=resume_expectations).manifest
        except CheckpointError:
            continue
        steps = int(manifest["counters"]["env_steps"])
        if manifest.get("replay_buffer") and steps < n_timesteps:
            found.append((steps, path))
    if not found:
        return None
    steps, path = max(found)
    return path, steps


def staging_of(cells: list[Cell], log: Path) -> Path:
    """The staging folder of a train.py run of these cells: the cell's own, or `<env>_<first>-<last>`."""
    if len(cells) == 1:
        return cells[0].staging(log)
    return log / PARTIAL / cells[0].algo / f"{cells[0].env.replace(':', '_')}_{cells[0].seed}-{cells[-1].seed}"


def train_cells(
    cells: list[Cell], settings: Mapping[Cell, Mapping[str, Any]], args: argparse.Namespace, label: str
) -> int:
    """Train one cell, or consecutive seeds of one algo and env as one --n-seeds run, in a staging folder,
    then move each finished seed's run folder into place; train.py's exit code."""
    log = args.log_folder
    staging = staging_of(cells, log)
    recorded = [settings[cell] for cell in cells]
    record = recorded[0] if len(cells) == 1 else recorded  # a single cell's record is its settings, as before
    resume = resumable_checkpoint(staging, record, recorded[0]["algo"], recorded[0]["n_timesteps"])
    seeds = ["--n-seeds", str(len(cells))] if len(cells) > 1 else []
    if resume is None:
        if staging.exists():
            print(f"{label}: removing the unfinished run in {staging}")
            shutil.rmtree(staging)
        staging.mkdir(parents=True)
        atomic_write_text(staging / CELL_FILE, json.dumps(record, indent=1, sort_keys=True) + "\n")
        argv = [*train_argv(cells[0], args, staging, recorded[0]["n_timesteps"]), *seeds]
        print(f"{label}: training ({recorded[0]['n_timesteps']} env steps)", flush=True)
    else:
        path, steps = resume
        # No -params: the checkpoint holds the resolved hyperparameters, and -n counts the steps to add; -i on
        # one seed's checkpoint continues all the seeds of its run.
        remaining = recorded[0]["n_timesteps"] - steps
        argv = [*train_argv(cells[0], args, staging, remaining, with_params=False), "-i", str(path)]
        print(f"{label}: continuing the interrupted run from {path} ({steps} env steps)", flush=True)
    start = time.perf_counter()
    code = train_cli.main(argv)
    wall_time = time.perf_counter() - start
    if code != 0:
        return code
    algo_dir, model_name = staging / cells[0].algo, cells[0].env.replace(":", "_")
    last = latest_run_id(algo_dir, model_name)  # this run's folders: the newest, one per seed
    for cell, run_id in zip(cells, range(last - len(cells) + 1, last + 1), strict=True):
        run_dir = algo_dir / f"{model_name}_{run_id}"
        done = {
            "settings": settings[cell],
            "finished": datetime.now(UTC).isoformat(timespec="seconds"),
            "wall_time_s": round(wall_time, 1),
            "resumed_from": None if resume is None else str(resume[0]),
            "trained_in": str(run_dir),
        }
        atomic_write_text(run_dir / DONE_FILE, json.dumps(done, indent=1, sort_keys=True) + "\n")
        cell.folder(log).parent.mkdir(parents=True, exist_ok=True)
        run_dir.rename(cell.folder(log))  # atomic: the run appears in the layout complete, or not at all
    shutil.rmtree(staging)
    remove_staging(cells[0], log)
    print(f"{label}: finished in {wall_time:.0f} s -> {', '.join(str(cell.folder(log)) for cell in cells)}", flush=True)
    return 0


def remove_staging(cell: Cell, log: Path) -> None:
    """Delete the cell's staging folder, then `.partial/<algo>` and `.partial` if nothing else is left."""
    staging = cell.staging(log)
    if staging.exists():
        shutil.rmtree(staging)
    for folder in (staging.parent, staging.parent.parent):
        try:
            folder.rmdir()
        except OSError:
            break  # not empty (or already gone)


def run_grid(
    cells: list[Cell], settings: Mapping[Cell, Mapping[str, Any]], args: argparse.Namespace, finished: set[Cell]
) -> tuple[list[str], int | None]:
    """Train the cells not in `finished` (which gains each run that finishes), in order, up to
    --seeds-per-run consecutive seeds of one algo and env per train.py run. Returns the failures and, if a
    run was stopped by a signal, its exit code (the grid stops there)."""
    failures = []
    batch: list[Cell] = []
    batches: list[list[Cell]] = []
    for cell in cells:
        if cell in finished:
            print(
                f"{cell.algo} {cell.env} seed {cell.seed}: finished earlier, skipped ({cell.folder(args.log_folder)})"
            )
            remove_staging(cell, args.log_folder)  # left behind if a previous invocation died after the move
            continue
        joins = batch and (batch[-1].algo, batch[-1].env, batch[-1].seed + 1) == (cell.algo, cell.env, cell.seed)
        if batch and (not joins or len(batch) == args.seeds_per_run):
            batches.append(batch)
            batch = []
        batch.append(cell)
    if batch:
        batches.append(batch)
    done, to_train = 0, sum(len(batch) for batch in batches)
    for batch in batches:
        seeds = f"seed {batch[0].seed}" if len(batch) == 1 else f"seeds {batch[0].seed}-{batch[-1].seed}"
        label = f"[{done + len(batch)}/{to_train}] {batch[0].algo} {batch[0].env} {seeds}"
        code = train_cells(batch, settings, args, label)
        done += len(batch)
        if code in EXIT_STOPPED:
            print(f"{label}: stopped (exit {code}); run the same command again to continue", file=sys.stderr)
            return failures, code
        if code == 0:
            finished.update(batch)
        else:
            staging = staging_of(batch, args.log_folder)
            failures += [f"{cell.algo}/{cell.name} (exit {code}; files in {staging})" for cell in batch]
    return failures, None


# -- the report ----------------------------------------------------------------------------------


def runs_table(groups: list[plots.Group], log: Path) -> str:
    lines = ["| algo | env | seed | run folder | last eval at | final return | wall time (s) |", "|---" * 7 + "|"]
    for g in groups:
        for run, returns in zip(g.runs, g.returns, strict=True):
            done = json.loads((run / DONE_FILE).read_text())
            lines.append(
                f"| {g.algo} | {g.env} | {done['settings']['seed']} | {run.relative_to(log)} | "
                f"{int(g.timesteps[-1])} | {returns[-1]:.1f} | {done['wall_time_s']:.0f} |"
            )
    return "\n".join(lines) + "\n"


def shown_command(argv: Sequence[str]) -> str:
    """The command as the report prints it: an absolute path (the value of -f, --output, ...) made relative
    to the working directory, so a committed report names no machine's folders and reruns from there."""

    def relative(value: str) -> str:
        return os.path.relpath(value) if os.path.isabs(value) else value

    shown = []
    for token in argv:
        flag, equals, value = token.partition("=")
        if token.startswith("-") and equals:
            token = f"{flag}={relative(value)}"
        elif token.startswith("-f") and not token.startswith("--") and len(token) > 2:
            token = "-f" + relative(token[2:])  # argparse's attached form, -f/path
        shown.append(relative(token))
    return f"python -m rlbench.bench returns {shlex.join(shown)}"


def write_report(
    cells: list[Cell],
    settings: Mapping[Cell, Mapping[str, Any]],
    args: argparse.Namespace,
    argv: Sequence[str],
    finished: set[Cell],
    failures: list[str],
) -> Path | None:
    """The markdown report and its PNGs (one per env, `<output stem>_<env>.png` beside it); None when
    no run has finished."""
    log, output = args.log_folder, args.output
    groups = []
    for env in _unique(c.env for c in cells):
        for algo in _unique(c.algo for c in cells):
            runs = [c.folder(log) for c in cells if (c.algo, c.env) == (algo, env) and c in finished]
            group = plots.load_group(env, algo, runs) if runs else None
            if group is not None:
                groups.append(group)
    if not groups:
        return None
    n_timesteps = {(c.env, c.algo): settings[c]["n_timesteps"] for c in cells}
    per_algo = {algo: " ".join(algo_params(algo, args)) for algo in _unique(c.algo for c in cells)}
    params = "; ".join(f"{algo} `{tokens}`" if tokens else f"{algo} none" for algo, tokens in per_algo.items())
    first = settings[cells[0]]
    episodes = f"{first['eval_episodes']} deterministic episode" + ("s" if first["eval_episodes"] > 1 else "")
    lines = [
        "# Returns benchmark",
        "",
        f"Date: {datetime.now(UTC).strftime('%Y-%m-%d %H:%M UTC')}",
        "",
        "Command:",
        "",
        f"    {shown_command(argv)}",
        "",
        f"Machine: {machine_line()}",
        "",
        "Runs: `<algo>/<env>_<seed>` in the log folder (-f; RL Zoo layout), one train.py run each with the "
        f"hyperparameter file entry of its env (`hyperparams/<algo>.yml`) and these -params: {params}. Evaluation "
        f"every {first['eval_freq']} env steps, {episodes} each. Statistics over seeds of each run's "
        "mean evaluation return: mean, IQM (mean of the middle half) and a 95% percentile-bootstrap interval "
        "of the mean (2000 resamples). Published: the same env, algorithm and env steps (- when none).",
        "",
    ]
    if failures:
        lines += [f"Missing (failed) runs: {', '.join(failures)}", ""]
    unfinished = [f"{c.algo}/{c.name}" for c in cells if c not in finished]
    if args.report_only and unfinished:  # (when training, a cell that did not finish is a failure)
        lines += [f"Not trained yet (left out of the tables): {', '.join(unfinished)}", ""]
    return write_returns_report(groups, n_timesteps, args.at_steps, output, lines, runs_table(groups, log))


def main(argv: Sequence[str]) -> int:
    """`python -m rlbench.bench returns ARGV...` (rlbench.bench.__main__ passes the command line)."""
    argv = list(argv)
    args = build_parser().parse_args(argv)
    try:
        cells = check_args(args)
        plots.import_plot_packages()  # the report's curves: before hours of training, not after
        settings = resolve_settings(cells, args)
        finished = {c for c in cells if is_finished(c, settings[c], args.log_folder)}
    except ConfigError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    if args.report_only:
        print(
            f"{len(cells)} runs: {len(finished)} finished, {len(cells) - len(finished)} not (--report-only: "
            f"nothing is trained; log folder {args.log_folder})",
            flush=True,
        )
        failures = []
    else:
        print(
            f"{len(cells)} runs: {len(finished)} finished earlier, {len(cells) - len(finished)} to train "
            f"(log folder {args.log_folder})",
            flush=True,
        )
        try:
            failures, stopped = run_grid(cells, settings, args, finished)
        except KeyboardInterrupt:
            print("aborted; run the same command again to continue", file=sys.stderr)
            return 130
        if stopped is not None:
            return stopped
    report = write_report(cells, settings, args, argv, finished, failures)
    if failures:
        print(f"failed {len(failures)}: {', '.join(failures)}", file=sys.stderr)
    if report is None:
        print("error: no finished run to report", file=sys.stderr)
        return 1
    print(f"wrote {report}")
    return 1 if failures else 0
