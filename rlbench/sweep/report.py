"""A sweep's returns report (`<sweep>/report.md` and its PNGs): rlbench.report.returns's tables, rliable's
comparison and curves over the finished cells, one curve per algo and grid setting (so a grid axis such as
`--grid temperature_loss:log_alpha,alpha` is answered by the P(improvement) of its settings)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from rlbench.redact import printable
from rlbench.report import plots, statistics
from rlbench.report.escaping import as_markdown
from rlbench.report.returns import machine_line
from rlbench.report.returns import write_report as write_returns_report
from rlbench.sweep.grid import Cell, SweepSpec
from rlbench.sweep.manifest import DONE, FAILED, Manifest


def reported_runs(
    members: list[Cell], manifest: Manifest, log_root: Path, finals: Mapping[Path, tuple[int, float]]
) -> dict[Path, Cell]:
    """The finished cells' run folders with something to report: an evaluations.npz or a final evaluation."""
    found = {}
    for cell in members:
        record = manifest.cells[cell.key]
        if record.state == DONE and record.run_dir is not None:
            run = log_root / record.run_dir
            if (run / "evaluations.npz").is_file() or run in finals:
                found[run] = cell
    return found


def write_sweep_report(spec: SweepSpec, manifest: Manifest, folder: Path, log_root: Path, at_steps: int) -> Path | None:
    """The report of the finished cells; None when none has an evaluation. A cell's curve ends with its
    final evaluation (rlbench.sweep.final_eval) where its last one was earlier, or is that point alone for a
    run shorter than --eval-freq."""
    finals = {
        log_root / record.run_dir: (record.final_eval["env_steps"], record.final_eval["mean_return"])
        for record in manifest.cells.values()
        if record.state == DONE and record.run_dir is not None and record.final_eval is not None
    }
    groups, rows, n_timesteps = [], [], {}
    for env, algo, members in curves(spec):
        by_run = reported_runs(members, manifest, log_root, finals)
        if not by_run:
            continue
        setting = next(iter(by_run.values())).setting_label
        for group in plots.load_groups(env, algo, list(by_run), finals, setting=setting):
            groups.append(group)
            n_timesteps[(env, group.label)] = int(group.timesteps[-1])
            for run, returns in zip(group.runs, group.returns, strict=True):  # unreadable runs left out
                cell = by_run[run]
                record = manifest.cells[cell.key]
                names = (group.label, env, cell.seed, record.run_dir, record.node)
                rows.append(
                    f"| {' | '.join(map(as_markdown, names))} | {record.attempts} | {returns[-1]:.1f} | "
                    f"{record.wall_time_s:.0f} |"
                )
    if not groups:
        return None
    extended = any(run in finals for group in groups for run in group.runs)
    runs = "\n".join(
        [
            "| curve | env | seed | run folder | node | attempts | final return | wall time (s) |",
            "|---" * 8 + "|",
            *rows,
        ]
    )
    intro = introduction(spec, manifest, extended)
    return write_returns_report(groups, n_timesteps, at_steps, folder / "report.md", intro, runs + "\n")


def curves(spec: SweepSpec) -> list[tuple[str, str, list[Cell]]]:
    """(env, algo, the seeds' cells) of each curve the grid can have, one per setting, in the report's order."""
    cells = spec.cells()
    return [
        (env, algo, [c for c in cells if (c.algo, c.env, c.setting) == (algo, env, setting)])
        for env in spec.envs
        for algo in spec.algos
        for setting in spec.settings()
    ]


def introduction(spec: SweepSpec, manifest: Manifest, extended: bool) -> list[str]:
    """The lines above the tables: the command, the machine, the grid, the statistics, what is left out.
    `extended`: some curve ends with a final evaluation the sweep made."""
    failed = [f"{key} ({record.error})" for key, record in manifest.cells.items() if record.state == FAILED]
    unfinished = [key for key, record in manifest.cells.items() if record.state not in (DONE, FAILED)]
    grid = manifest.grid
    settings = "; ".join(f"{key}: {', '.join(values)}" for key, values in spec.grid)
    intro = [
        f"# Sweep {spec.name}",
        "",
        "Command:",
        "",
        f"    {printable(manifest.command)}",
        "",
        f"Machine (driver): {machine_line()}",
        "",
        f"Grid: algos {', '.join(spec.algos)}; envs {', '.join(spec.envs)}; seeds {', '.join(map(str, spec.seeds))}"
        + (f"; settings {settings}" if spec.grid else "")
        + f"; -params {' '.join(spec.params) or 'none'}; evaluation every {grid['eval_freq']} env steps, "
        f"{grid['eval_episodes']} episodes. Packing: {as_markdown(manifest.packing.get('reason', 'n/a'))}.",
        "",
        "Statistics over seeds of each run's mean evaluation return: mean, IQM (mean of the middle half) and a "
        f"95% percentile-bootstrap interval of the mean (rliable's stratified bootstrap, {statistics.REPS} "
        "resamples). Published: the same env, algorithm and env steps (- when none).",
        "",
    ]
    if extended:
        intro += [
            "train.py evaluates every --eval-freq env steps, not at the end: where a run's last evaluation was "
            "earlier than its last env step (or it had none), its curve ends with its final model evaluated by "
            f"the sweep ({grid['eval_episodes']} episodes, as train.py's next evaluation would have been).",
            "",
        ]
    if failed:
        intro += [f"Failed cells (left out): {as_markdown('; '.join(failed))}", ""]
    if unfinished:
        intro += [f"Unfinished cells (left out): {as_markdown(', '.join(unfinished))}", ""]
    return intro
