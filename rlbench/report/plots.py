"""Learning curves, final-return tables and their statistics from RL Zoo log folders
(`python -m rlbench.report.plots A B [-l LABEL_A LABEL_B]`).

Reads every `<folder>/<algo>/<env_id>_<N>[_<uuid>]/evaluations.npz`. One curve per folder (named by its
`-l` label), algo and env, and per setting where the runs' resolved hyperparameters differ
(rlbench.report.variants): runs of different folders are never pooled. Writes one PNG per env (mean over
seeds with a 95% bootstrap band, x in env steps), a performance profile, and prints a markdown table of the
final evaluation (mean +/- standard error over seeds, IQM) and rliable's comparison of the curves
(rlbench.report.statistics): IQM and mean with stratified bootstrap intervals, P(improvement) per pair in
words, across envs on min-max normalised scores.

Runs are aligned by env steps, never by evaluation index: a curve covers only the env steps every one of
its runs reached, on the union of their evaluation points there; a run not evaluated at one of those
points is linearly interpolated between its neighbours, and the legend and table say so. Runs covering
different ranges, or evaluated at different env steps, get a warning naming them; runs that share no
evaluated env steps are plotted as one curve per evaluation schedule.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from rlbench.errors import ConfigError, OneLineParser
from rlbench.files import atomic_write_text
from rlbench.report import statistics
from rlbench.report.escaping import as_markdown, as_plot_text
from rlbench.report.evaluations import run_curve
from rlbench.report.variants import find_runs, folder_labels, split_by_settings, warn

PROFILE_FILE = "performance_profile.png"


def curve_label(system: str, algo: str, setting: str) -> str:
    """A curve's name: its folder's label, the algo and the setting, e.g. "SBX sac learning_rate=0.001"."""
    return " ".join(part for part in (system, algo, setting) if part)


@dataclass
class Group:
    env: str
    algo: str
    timesteps: np.ndarray  # [n_points]: env steps every run reached (the union of their evaluation points)
    returns: np.ndarray  # [n_seeds, n_points], mean over each evaluation's episodes
    runs: list[Path]
    interpolated: bool = False  # some run was not evaluated at some point and was interpolated there
    system: str = ""  # the log folder's label (-l), "" for a single folder
    setting: str = ""  # the hyperparameters that set this curve's runs apart, "key=value ..."

    @property
    def label(self) -> str:
        return curve_label(self.system, self.algo, self.setting)

    def scores(self) -> statistics.Scores:
        """The final evaluation returns, for the statistics."""
        return statistics.Scores(self.env, self.label, self.algo, int(self.timesteps[-1]), self.returns[:, -1])


def import_plot_packages() -> None:
    """matplotlib, scipy and rliable (the plots extra), checked before any work: ConfigError naming the
    install."""
    try:
        import matplotlib  # noqa: F401
        import scipy.stats  # noqa: F401
        from rliable import library  # noqa: F401
    except ImportError as error:
        raise ConfigError(
            f'plots need the plots extra ({error}): pip install -e ".[plots]" (or pip install matplotlib scipy rliable)'
        ) from None


Curve = tuple[Path, np.ndarray, np.ndarray]  # a run, its evaluation env steps and mean returns


def read_curves(
    env: str, label: str, runs: list[Path], final_points: Mapping[Path, tuple[int, float]] | None
) -> list[Curve]:
    """The runs' curves (`run_curve`); a run with no evaluation yet is left out with a warning."""
    curves = []
    for run in runs:
        curve = run_curve(run, (final_points or {}).get(run))
        if curve is None:
            continue
        if len(curve[0]) == 0:
            warn(f"{run}: no evaluation yet; left out of {env} {label}")
        else:
            curves.append((run, *curve))
    return curves


def aligned(env: str, algo: str, curves: list[Curve], system: str = "", setting: str = "") -> Group | None:
    """The curves' mean returns aligned by env steps (see the module docstring); None, with a warning, when
    they share no env steps."""
    name = f"{env} {curve_label(system, algo, setting)}"
    start = max(int(steps[0]) for _, steps, _ in curves)
    end = min(int(steps[-1]) for _, steps, _ in curves)
    ranges = {(int(steps[0]), int(steps[-1])) for _, steps, _ in curves}
    if len(ranges) > 1:
        spans = ", ".join(f"{run.name} {int(steps[0])}-{int(steps[-1])}" for run, steps, _ in curves)
        kept = f"kept only {start}-{end}, the env steps every run reached" if start <= end else "nothing in common"
        warn(f"{name}: runs cover different env-step ranges ({spans}); {kept}")
    elif len({steps.tobytes() for _, steps, _ in curves}) > 1:
        runs = ", ".join(f"{run.name} ({len(steps)} evaluations)" for run, steps, _ in curves)
        warn(f"{name}: runs evaluated at different env steps ({runs}); interpolated to the union of their points")
    if start > end:
        return None
    grid = np.unique(np.concatenate([steps[(steps >= start) & (steps <= end)] for _, steps, _ in curves]))
    returns = np.array([np.interp(grid, steps, values) for _, steps, values in curves])
    interpolated = any(not np.isin(grid, steps).all() for _, steps, _ in curves)
    return Group(env, algo, grid, returns, [run for run, _, _ in curves], interpolated, system, setting)


def load_group(
    env: str,
    algo: str,
    runs: list[Path],
    final_points: Mapping[Path, tuple[int, float]] | None = None,
    system: str = "",
    setting: str = "",
) -> Group | None:
    """The runs' mean evaluation returns aligned by env steps (see the module docstring); None when no
    run has an evaluation yet or the runs share no env steps (with a warning). A run whose evaluations.npz
    is unreadable is left out with a warning naming the file. `final_points[run]`: (env steps, mean
    return) of an evaluation at the run's end (a sweep's), appended when later than its last evaluation."""
    curves = read_curves(env, curve_label(system, algo, setting), runs, final_points)
    return aligned(env, algo, curves, system, setting) if curves else None


def by_schedule(curves: list[Curve]) -> list[list[Curve]]:
    """The curves in clusters whose runs all reached some common env steps, by their first evaluation."""
    clusters: list[list[Curve]] = []
    common = (0, -1)
    for curve in sorted(curves, key=lambda curve: (int(curve[1][0]), int(curve[1][-1]))):
        start, end = max(common[0], int(curve[1][0])), min(common[1], int(curve[1][-1]))
        if clusters and start <= end:
            clusters[-1].append(curve)
            common = (start, end)
        else:
            clusters.append([curve])
            common = (int(curve[1][0]), int(curve[1][-1]))
    return clusters


def load_groups(
    env: str,
    algo: str,
    runs: list[Path],
    final_points: Mapping[Path, tuple[int, float]] | None = None,
    system: str = "",
    setting: str = "",
) -> list[Group]:
    """`load_group`, but runs sharing no evaluated env steps make one curve per evaluation schedule (the
    setting then says its env steps), with a warning naming the runs, instead of none."""
    label = curve_label(system, algo, setting)
    curves = read_curves(env, label, runs, final_points)
    clusters = by_schedule(curves) if curves else []
    if len(clusters) < 2:
        group = aligned(env, algo, curves, system, setting) if curves else None
        return [group] if group is not None else []
    spans = ", ".join(f"{run.name} {int(steps[0])}-{int(steps[-1])}" for run, steps, _ in curves)
    warn(f"{env} {label}: runs share no evaluated env steps ({spans}); one curve per evaluation schedule")
    groups = []
    for cluster in clusters:
        first, last = max(int(c[1][0]) for c in cluster), min(int(c[1][-1]) for c in cluster)
        schedule = " ".join(part for part in (setting, f"evaluated {first}-{last}") if part)
        groups.append(aligned(env, algo, cluster, system, schedule))
    return [group for group in groups if group is not None]


def collect(folders: list[Path], labels: list[str] | None = None) -> list[Group]:
    """The curves of the folders: one per folder (`labels`: one per folder), algo, env and setting."""
    groups = []
    for folder, system in zip(folders, folder_labels(folders, labels), strict=True):
        for (env, algo), runs in sorted(find_runs(folder).items()):
            for setting, members in split_by_settings(runs, env):
                groups += load_groups(env, algo, members, system=system, setting=setting)
    return sorted(groups, key=lambda group: group.env)  # stable: each env's curves in the folders' order


def final_stats(returns: np.ndarray) -> dict[str, float]:
    _, metrics = statistics.import_rliable()
    final = returns[:, -1]
    stderr = float(final.std(ddof=1) / np.sqrt(len(final))) if len(final) > 1 else 0.0
    return {"mean": float(final.mean()), "stderr": stderr, "iqm": float(metrics.aggregate_iqm(final)), "n": len(final)}


def markdown_table(groups: list[Group]) -> str:
    lines = ["| env | curve | seeds | env steps | final return (mean +/- s.e.) | IQM |", "|---|---|---|---|---|---|"]
    for g in groups:
        s = final_stats(g.returns)
        steps = f"{int(g.timesteps[-1])}" + (" (interpolated)" if g.interpolated else "")
        lines.append(
            f"| {as_markdown(g.env)} | {as_markdown(g.label)} | {s['n']} | {steps} | {s['mean']:.1f} +/- "
            f"{s['stderr']:.1f} | {s['iqm']:.1f} |"
        )
    return "\n".join(lines)


def plot(
    groups: list[Group],
    output: Path,
    prefix: str = "",
    markers: Mapping[tuple[str, str], Sequence[tuple[int, float]]] | None = None,
    reps: int | None = None,
) -> list[Path]:
    """One PNG per env, `<output>/<prefix><env>.png`, a curve per group. `markers[(env, algo)]`: (env steps,
    return) points drawn as crosses in the colour of the algo's first curve (published results)."""
    import matplotlib

    matplotlib.use("Agg")  # files only, never a window
    import matplotlib.pyplot as plt

    output.mkdir(parents=True, exist_ok=True)
    written = []
    for env in sorted({g.env for g in groups}):
        fig, ax = plt.subplots(figsize=(6, 4))
        marked = set()
        for g in (g for g in groups if g.env == env):
            low, high = statistics.mean_band(g.returns, reps)
            runs = f"n={len(g.runs)}" + (", interpolated to common env steps" if g.interpolated else "")
            (line,) = ax.plot(g.timesteps, g.returns.mean(axis=0), label=f"{as_plot_text(g.label)} ({runs})")
            ax.fill_between(g.timesteps, low, high, alpha=0.25)
            points = (markers or {}).get((env, g.algo))
            if points and g.algo not in marked:
                marked.add(g.algo)
                steps, values = zip(*points, strict=True)
                ax.scatter(steps, values, marker="x", color=line.get_color(), label=f"{as_plot_text(g.algo)} published")
        ax.set(title=as_plot_text(env), xlabel="env steps", ylabel="mean eval return")
        ax.legend()
        ax.grid(alpha=0.3)
        path = output / f"{prefix}{env.replace(':', '_')}.png"
        fig.savefig(path, dpi=120, bbox_inches="tight")
        plt.close(fig)
        written.append(path)
    return written


def report_text(groups: list[Group], reps: int | None) -> str:
    """The final-return table and rliable's comparison of the curves."""
    comparison = statistics.comparison_section([g.scores() for g in groups], reps)
    return markdown_table(groups) + "\n\n" + "\n".join(comparison)


def main(argv: list[str] | None = None) -> int:
    p = OneLineParser(prog="python -m rlbench.report.plots", description=__doc__.splitlines()[0])
    p.add_argument("folders", nargs="+", type=Path, help="log folders (the -f of train.py)")
    p.add_argument("-l", "--labels", nargs="+", default=None, help="a label per folder, for legends and tables")
    p.add_argument("-o", "--output", type=Path, default=Path("plots"), help="folder for the PNG files")
    p.add_argument("--table", type=Path, default=None, help="also write the markdown table here")
    p.add_argument("--reps", type=int, default=statistics.REPS, help=f"bootstrap resamples (default {statistics.REPS})")
    args = p.parse_args(argv)
    try:
        missing = [str(folder) for folder in args.folders if not folder.is_dir()]
        if missing:
            raise ConfigError(f"log folder not found: {', '.join(missing)}")
        folder_labels(args.folders, args.labels)
        if args.reps < 1:
            raise ConfigError(f"--reps: expected an integer >= 1, got {args.reps}")
        import_plot_packages()
    except ConfigError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    groups = collect(args.folders, args.labels)
    if not groups:
        print(f"error: no evaluations.npz under {', '.join(map(str, args.folders))}", file=sys.stderr)
        return 2
    table = report_text(groups, args.reps)
    print(table)
    if args.table:
        atomic_write_text(args.table, table + "\n")
    for path in plot(groups, args.output, reps=args.reps):
        print(f"wrote {path}")
    profile = statistics.plot_profile([g.scores() for g in groups], args.output / PROFILE_FILE, args.reps)
    if profile is not None:
        print(f"wrote {profile}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
