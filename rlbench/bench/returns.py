"""Sample-efficiency benchmark: train a grid of runs, then report returns beside published ones
(`python -m rlbench.bench returns`).

The grid is algo x env x seed, trained as a sweep (rlbench.sweep, on Ray: a private instance on this
machine, or a cluster with --address) named --name (default `returns`). Each cell is one ordinary
train.py run with the algorithm's hyperparameter file entry for the env, in `<log>/<algo>/<env>_<N>/`
(RL Zoo layout; the report's runs table gives each seed's folder), recorded in the sweep's manifest
`<log>/sweeps/<name>/manifest.json`. So the same command again skips the finished runs and continues
the interrupted ones from their checkpoints, and other settings under the same name (-n, -params,
evaluation, an edited hyperparameter file) are refused with the difference instead of mixing results.
--report-only reports what the manifest says has finished and trains nothing.

With `--peer PYTHON` (a virtual environment with SBX and RL Zoo) SBX trains the same cells through RL Zoo
once rlbench's have run, one process per core, and the report shows its runs as `sbx <algo>` beside
rlbench's (rlbench.bench.peer); a peer cell that is refused, fails or is not run is named in the report.

The report gives, per env and algo over seeds, the mean, the interquartile mean (IQM: the mean of the
middle half, Agarwal et al. 2021) and a 95% percentile-bootstrap interval of the mean, of (a) the final
evaluation return and (b) the evaluation return at `--at-steps` env steps (the last evaluation at or
below it), beside the published numbers in REFERENCES, with learning curves drawn by rlbench.report.plots.
"""

from __future__ import annotations

import argparse
import os
import shlex
import signal
import sys
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from rlbench.bench import peer as sbx
from rlbench.bench.children import ChildrenStopped
from rlbench.bench.peer_hyperparams import missing_peers
from rlbench.cli.flags import flag, parser_from, seeds_group, shared
from rlbench.envs.checks import check_env_id
from rlbench.errors import ConfigError, RunFailure
from rlbench.redact import printable, redact_argv
from rlbench.report import plots, statistics
from rlbench.report.escaping import as_markdown
from rlbench.report.returns import REFERENCES, machine_line
from rlbench.report.returns import write_report as write_returns_report
from rlbench.run import compile_cache
from rlbench.run.exit_codes import EXIT_ABORTED, EXIT_INTERRUPTED, exit_code
from rlbench.run.outputs import RunOutputs
from rlbench.sweep import command as sweep_cli
from rlbench.sweep.engine import import_ray, run_sweep
from rlbench.sweep.final_eval import run_length
from rlbench.sweep.grid import SweepSpec, sweep_dir
from rlbench.sweep.manifest import DONE, FAILED, MANIFEST_FILE, Manifest, load_manifest
from rlbench.sweep.options import SweepOptions

DEFAULT_LOG_FOLDER = Path("logs/bench_returns")
REPORT_FILE = "returns.md"  # in the sweep's folder, <-f>/sweeps/<name>/, unless --output names another
DEFAULT_NAME = "returns"
PEER_STOPPED = "the SBX cells still training were killed; the same command runs them again from their start:"


FLAGS = (
    shared("algos", default=["sac", "crossq", "droq"]),
    shared("envs", default=["HalfCheetah-v4", "Hopper-v4"]),
    seeds_group(),
    shared("n_timesteps", help="env steps per run (default: the hyperparameter file's n_timesteps)"),
    shared("log_folder", type=Path, default=DEFAULT_LOG_FOLDER, help="runs go to <folder>/<algo>/"),
    flag("--name", default=DEFAULT_NAME, help=f"the sweep's name: <folder>/sweeps/<name>/ (default {DEFAULT_NAME})"),
    shared("eval_freq", default=10_000, help="evaluate every n env steps"),
    shared("eval_episodes"),
    shared("at_steps", help="the second table: returns at this many env steps (the last evaluation at or below)"),
    flag(
        "--output",
        type=Path,
        default=None,
        help=f"the markdown report; PNGs go beside it (default <-f>/sweeps/<name>/{REPORT_FILE}, the sweep's folder)",
    ),
    shared("hyperparams", help="hyperparameter overrides for every run, as train.py's -params"),
    shared(
        "params_for",
        help="overrides for one algorithm's runs, applied after -params (repeat per algorithm), e.g. "
        "--params-for crossq precision:bfloat16",
    ),
    shared("conf_file", help="hyperparameter file (default hyperparams/<algo>.yml)"),
    flag(
        "--report-only",
        action="store_true",
        help="train nothing: write the report from the runs the sweep's manifest records as finished (e.g. "
        "while the same command is still training the rest of the grid)",
    ),
    flag(
        "--seeds-per-run",
        type=int,
        default=None,
        metavar="K",
        help="train up to K consecutive seeds of an algo and env in one process (--n-seeds K: one vmapped "
        "learner, the fast way on a GPU); each seed still gets its own run folder (default: the sweep's "
        "packing, 1 on CPUs)",
    ),
    shared("address"),
    shared("device", help="as the sweep's"),
    shared("peer", help=f"{shared('peer').options['help']}: trains the same cells with SBX through RL Zoo"),
    shared("peer_device"),
)


def build_parser() -> argparse.ArgumentParser:
    return parser_from(FLAGS, prog="python -m rlbench.bench returns", description=__doc__.splitlines()[0])


def sweep_args(args: argparse.Namespace) -> argparse.Namespace:
    """The sweep command line's defaults with this command's values: what rlbench.sweep.command reads."""
    merged = sweep_cli.build_parser().parse_args([])
    vars(merged).update(vars(args), seeds_per_process=args.seeds_per_run)
    return merged


def check_args(args: argparse.Namespace) -> SweepSpec:
    """The grid as a sweep, after checking the names and numbers (ConfigError naming the bad value); --output
    left out is the sweep's folder's report."""
    for env in args.envs:
        try:
            check_env_id(env)
        except ConfigError as error:
            known = ", ".join(dict.fromkeys(env for env, _ in REFERENCES))
            raise ConfigError(
                f"{error} (valid: any registered gymnasium id; with published references: {known})"
            ) from None
    if args.seeds_per_run is not None and args.seeds_per_run < 1:
        raise ConfigError(f"--seeds-per-run: expected an integer >= 1, got {args.seeds_per_run}")
    spec = sweep_cli.spec_from_args(sweep_args(args))
    check_evaluated(spec)
    if args.output is None:  # not the working folder: run from a checkout, that is the committed report's place
        args.output = sweep_dir(args.log_folder, spec.name) / REPORT_FILE
    return spec


def check_evaluated(spec: SweepSpec) -> None:
    """ConfigError when runs are shorter than --eval-freq: neither train.py nor RL Zoo would evaluate them while
    they train, and the report compares those evaluations, so the grid would train for nothing."""
    tables: dict[str, dict[str, Any] | None] = {}
    lengths = ((run_length(spec, cell, tables) or 0, f"{cell.algo} {cell.env}") for cell in spec.cells())
    short = sorted((steps, runs) for steps, runs in lengths if 0 < steps < spec.eval_freq)
    if short:
        steps, runs = short[0]
        raise ConfigError(
            f"--eval-freq {spec.eval_freq}: longer than the {runs} runs ({steps} env steps), which would end "
            f"without an evaluation to report (rlbench's and SBX's alike); pass --eval-freq {steps} or less, e.g. "
            f"--eval-freq {max(1, steps // 10)} for ten points per curve"
        )


def recorded_manifest(spec: SweepSpec, log_folder: Path) -> Manifest | None:
    """The sweep's manifest, None before its first run; ConfigError (with the differences) for another grid."""
    path = sweep_dir(log_folder, spec.name) / MANIFEST_FILE
    return load_manifest(path, spec) if path.exists() else None


def train(spec: SweepSpec, args: argparse.Namespace, command: str) -> int:
    """Run the grid's unfinished cells on the sweep engine; its exit code (0, 1, 75, 130)."""
    cache = compile_cache.enable(None)
    frequency = sweep_cli.save_freq(sweep_args(args), spec)
    outputs = RunOutputs(
        log_folder=str(args.log_folder),
        save_freq=frequency,
        keep_checkpoints=1,
        save_replay_buffer=frequency > 0,
        verbose=1,
    )
    request = sweep_cli.cell_template(args)
    options = SweepOptions(
        log_root=args.log_folder,
        address=args.address,
        seeds_per_process=args.seeds_per_run,
        compile_cache=str(cache) if cache is not None else compile_cache.OFF,
        at_steps=args.at_steps,
        report=False,  # this command's report, with the published references, goes to --output
        notes=(compile_cache.describe(cache),),
    )
    return run_sweep(spec, options, request, outputs, sweep_cli.record_args, command)


# -- the report ----------------------------------------------------------------------------------


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


def collect_groups(
    spec: SweepSpec, manifest: Manifest, log: Path, peer_cells: list[sbx.PeerCell]
) -> tuple[list[plots.Group], dict[tuple[str, str], int], list[str]]:
    """The report's curves (rlbench's and the peer's finished cells of each env and algo), the env steps of
    each curve by (env, label), and the runs table's rows. With a peer, rlbench's curves are labelled
    `rlbench <algo>` and the peer's `sbx <algo>`, so that the statistics compare each algo's two systems."""
    cells = spec.cells()
    system = "rlbench" if peer_cells else ""
    groups: list[plots.Group] = []
    rows: list[str] = []
    for env in spec.envs:
        for algo in spec.algos:
            done = [c for c in cells if (c.algo, c.env) == (algo, env) and manifest.cells[c.key].state == DONE]
            # a done cell's run_dir is set (load_manifest refuses one without)
            runs = {log / run_dir: c for c in done if (run_dir := manifest.cells[c.key].run_dir) is not None}
            group = plots.load_group(env, algo, list(runs), system=system) if runs else None
            if group is not None:
                groups.append(group)
                for run, returns in zip(group.runs, group.returns, strict=True):
                    cell, record = runs[run], manifest.cells[runs[run].key]
                    rows.append(
                        f"| {group.label} | {env} | {cell.seed} | {record.run_dir} | {int(group.timesteps[-1])} | "
                        f"{returns[-1]:.1f} | {record.wall_time_s:.0f} |"
                    )
            peer_group, peer_rows = sbx.report_group(peer_cells, env, algo, log)  # beside rlbench's
            if peer_group is not None:
                groups.append(peer_group)
                rows += peer_rows
    n_timesteps = {(g.env, g.label): int(g.timesteps[-1]) for g in groups}
    return groups, n_timesteps, rows


def cells_not_reported(spec: SweepSpec, manifest: Manifest) -> list[str]:
    """The report's lines on rlbench's cells without a finished run: failed, or not trained yet."""
    cells = spec.cells()
    states = {c: manifest.cells[c.key].state for c in cells}
    failed = [f"{c.algo}/{c.env} seed {c.seed} ({manifest.cells[c.key].error})" for c in cells if states[c] == FAILED]
    unfinished = [f"{c.algo}/{c.env} seed {c.seed}" for c in cells if states[c] not in (DONE, FAILED)]
    lines = [f"Missing (failed) runs: {as_markdown(', '.join(failed))}", ""] if failed else []  # the manifest's errors
    if unfinished:
        lines += [f"Not trained yet (left out of the tables): {', '.join(unfinished)}", ""]
    return lines


def write_report(
    spec: SweepSpec,
    manifest: Manifest,
    args: argparse.Namespace,
    command: str,
    peer: tuple[sbx.Peer | None, list[sbx.PeerCell]] = (None, []),
) -> Path | None:
    """The markdown report of the cells the manifest records as done (and of the peer's cells done), and its
    PNGs (one per env, `<output stem>_<env>.png` beside it); None when none has finished."""
    groups, n_timesteps, rows = collect_groups(spec, manifest, args.log_folder, peer[1])
    if not groups:
        return None
    cells = spec.cells()
    per_algo = {algo: " ".join(next(c for c in cells if c.algo == algo).params(spec)) for algo in spec.algos}
    params = "; ".join(f"{algo} `{tokens}`" if tokens else f"{algo} none" for algo, tokens in per_algo.items())
    episodes = f"{spec.eval_episodes} deterministic episode" + ("s" if spec.eval_episodes > 1 else "")
    lines = [
        "# Returns benchmark",
        "",
        f"Date: {datetime.now(UTC).strftime('%Y-%m-%d %H:%M UTC')}",
        "",
        "Command:",
        "",
        f"    {command}",
        "",
        f"Machine: {machine_line()}",
        "",
        "Runs: `<algo>/<env>_<N>` in the log folder (-f; RL Zoo layout; each seed's folder in the table below), "
        "one train.py run each with the hyperparameter file entry of its env (`hyperparams/<algo>.yml`) and "
        f"these -params: {params}. Evaluation every {spec.eval_freq} env steps, {episodes} each. Statistics "
        "over seeds of each run's mean evaluation return: mean, IQM (mean of the middle half) and 95% "
        f"intervals by rliable's stratified bootstrap ({statistics.REPS} resamples). Published: the same env, "
        "algorithm and env steps (- when none).",
        "",
        *sbx.report_lines(peer[1], peer[0]),
        *cells_not_reported(spec, manifest),
    ]
    table = ["| curve | env | seed | run folder | last eval at | final return | wall time (s) |", "|---" * 7 + "|"]
    return write_returns_report(groups, n_timesteps, args.at_steps, args.output, lines, "\n".join(table + rows) + "\n")


def main(argv: Sequence[str]) -> int:
    """`python -m rlbench.bench returns ARGV...` (rlbench.bench.__main__ passes the command line)."""
    argv = list(argv)
    args = build_parser().parse_args(argv)
    try:
        spec = check_args(args)
        if args.peer and (refusal := missing_peers(spec.algos)):  # A2C: before anything is trained or written
            raise ConfigError(refusal)
        plots.import_plot_packages()  # the report's curves: before hours of training, not after
        manifest = recorded_manifest(spec, args.log_folder)  # another grid under this name: refused here
        peer = sbx.probe_peer(args.peer, args.peer_device) if args.peer else None
        if not args.report_only:
            import_ray()
        peer_cells = plan_peer(spec, args) if args.peer else []
        # The command that trains the grid (--report-only left out): what the report shows and a stopped sweep names.
        command = shown_command(redact_argv([token for token in argv if token != "--report-only"]))
        code = 0 if args.report_only else train(spec, args, command)
    except (ConfigError, RunFailure) as error:  # RunFailure: the private Ray instance did not start
        return exit_code(error)
    if code in (EXIT_INTERRUPTED, EXIT_ABORTED):
        return code
    if peer is not None and not args.report_only:
        try:
            sbx.run_cells(peer_cells, peer, spec)
        except ChildrenStopped as stop:  # every peer process killed: the cells not done run afresh next time
            print(f"{signal.Signals(stop.signum).name}: {PEER_STOPPED} {printable(command)}", file=sys.stderr)
            return EXIT_INTERRUPTED
    if args.report_only:
        done = manifest.counts()[DONE] if manifest is not None else 0
        print(
            f"{len(spec.cells())} runs: {done} finished, {len(spec.cells()) - done} not (--report-only: nothing "
            f"is trained; sweep {sweep_dir(args.log_folder, spec.name)})",
            flush=True,
        )
    else:
        manifest = recorded_manifest(spec, args.log_folder)
    report = write_report(spec, manifest, args, command, (peer, peer_cells)) if manifest is not None else None
    if report is None:
        print("error: no finished run to report", file=sys.stderr)
        return 1
    print(f"wrote {report}")
    return max(code, peer_code(peer_cells))


def plan_peer(spec: SweepSpec, args: argparse.Namespace) -> list[sbx.PeerCell]:
    """The peer's cells, each with its RL Zoo entry or the reason it has none (said now, before any training)."""
    cells = sbx.plan_cells(spec, sweep_cli.cell_template(args), sweep_dir(args.log_folder, spec.name))
    for cell in cells:
        if cell.entry is None:
            print(f"sbx {cell.cell.algo} {cell.cell.env} seed {cell.cell.seed}: refused: {cell.refusal}", flush=True)
    return cells


def peer_code(cells: list[sbx.PeerCell]) -> int:
    """1 when a peer cell failed or did not run, as for a failed rlbench cell; a refused one (said before
    training) is not a failure. Each is named here and in the report."""
    missing = list(sbx.not_done(cells))
    for line in missing:
        print(f"sbx cell without a finished run: {line}", file=sys.stderr)
    return 1 if any(sbx.outcome(cell)["state"] in (sbx.FAILED, sbx.NOT_RUN) for cell in cells) else 0
