"""A sweep's returns report (`<sweep>/report.md` and its PNGs): rlbench.bench.report's tables and curves
over the finished cells, one curve per algo and grid setting."""

from __future__ import annotations

from pathlib import Path

from rlbench import plots
from rlbench.bench.report import machine_line
from rlbench.bench.report import write_report as write_returns_report
from rlbench.redact import printable
from rlbench.sweep.grid import DONE, FAILED, Manifest, SweepSpec


def curve_label(algo: str, setting_label: str) -> str:
    return f"{algo} {setting_label}" if setting_label else algo


def write_sweep_report(spec: SweepSpec, manifest: Manifest, folder: Path, log_root: Path, at_steps: int) -> Path | None:
    """The report of the finished cells; None when none has an evaluation yet."""
    groups, rows, n_timesteps = [], [], {}
    cells = spec.cells()
    for env in spec.envs:
        for algo in spec.algos:
            for setting in spec.settings():
                members = [c for c in cells if (c.algo, c.env, c.setting) == (algo, env, setting)]
                done = [  # a run shorter than --eval-freq has no evaluation to report
                    c
                    for c in members
                    if manifest.cells[c.key].state == DONE
                    and (log_root / manifest.cells[c.key].run_dir / "evaluations.npz").is_file()
                ]
                if not done:
                    continue
                label = curve_label(algo, done[0].setting_label)
                group = plots.load_group(env, label, [log_root / manifest.cells[c.key].run_dir for c in done])
                if group is None:
                    continue
                groups.append(group)
                n_timesteps[(env, label)] = int(group.timesteps[-1])
                by_run = {log_root / manifest.cells[c.key].run_dir: c for c in done}
                for run, returns in zip(group.runs, group.returns, strict=True):  # unreadable runs left out
                    cell = by_run[run]
                    record = manifest.cells[cell.key]
                    rows.append(
                        f"| {label} | {env} | {cell.seed} | {record.run_dir} | {record.node} | {record.attempts} | "
                        f"{returns[-1]:.1f} | {record.wall_time_s:.0f} |"
                    )
    if not groups:
        return None
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
        f"{grid['eval_episodes']} episodes. Packing: {manifest.packing.get('reason', 'n/a')}.",
        "",
        "Statistics over seeds of each run's mean evaluation return: mean, IQM (mean of the middle half) and a "
        "95% percentile-bootstrap interval of the mean (2000 resamples). Published: the same env, algorithm and "
        "env steps (- when none).",
        "",
    ]
    if failed:
        intro += [f"Failed cells (left out): {'; '.join(failed)}", ""]
    if unfinished:
        intro += [f"Unfinished cells (left out): {', '.join(unfinished)}", ""]
    runs = "\n".join(
        [
            "| curve | env | seed | run folder | node | attempts | final return | wall time (s) |",
            "|---" * 8 + "|",
            *rows,
        ]
    )
    return write_returns_report(groups, n_timesteps, at_steps, folder / "report.md", intro, runs + "\n")
