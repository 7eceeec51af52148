"""Learning curves and final-return tables from RL Zoo log folders (`python -m rlbench.report.plots`).

Reads every `<folder>/<algo>/<env_id>_<N>[_<uuid>]/evaluations.npz`, groups runs by (env, algo), and
writes one PNG per env (mean over seeds of the mean eval return, with a 95% bootstrap confidence band,
x in env steps) and prints a markdown table of the final evaluation: mean +/- standard error over
seeds, and the interquartile mean (IQM). With several envs it adds rliable-style aggregates (IQM, mean,
median of normalised scores with stratified bootstrap intervals; Agarwal et al. 2021).

Runs are aligned by env steps, never by evaluation index: a group's curve covers only the env steps
every one of its runs reached, on the union of their evaluation points there; a run not evaluated at
one of those points is linearly interpolated between its neighbours, and the legend and table say so.
Runs covering different ranges get a warning naming the range kept.
"""

from __future__ import annotations

import argparse
import math
import re
import sys
import zipfile
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from rlbench.errors import ConfigError
from rlbench.files import atomic_write_text

RUN_NAME = re.compile(r"(?P<env>.+)_(?P<id>\d+)(_[0-9a-f-]{36})?")
# evaluations.npz is read as untrusted input: 10M env steps evaluated every 1,000 with 100 episodes is 8 MB
# of results, so a member declaring more than 256 MiB (inflated, or in its .npy header) is not one.
MAX_EVALUATIONS_MEMBER_BYTES = 256 << 20


@dataclass
class Group:
    env: str
    algo: str
    timesteps: np.ndarray  # [n_points]: env steps every run reached (the union of their evaluation points)
    returns: np.ndarray  # [n_seeds, n_points], mean over each evaluation's episodes
    runs: list[Path]
    interpolated: bool = False  # some run was not evaluated at some point and was interpolated there


def import_plot_packages() -> None:
    """matplotlib and scipy (the plots extra), checked before any work: ConfigError naming the install."""
    try:
        import matplotlib  # noqa: F401
        import scipy.stats  # noqa: F401
    except ImportError as error:
        raise ConfigError(
            f'plots need the plots extra ({error}): pip install -e ".[plots]" (or pip install matplotlib scipy)'
        ) from None


def find_runs(folders: list[Path]) -> dict[tuple[str, str], list[Path]]:
    """{(env, algo): run folders holding an evaluations.npz} under RL Zoo log folders."""
    found: dict[tuple[str, str], list[Path]] = defaultdict(list)
    for folder in folders:
        for npz in sorted(Path(folder).glob("*/*/evaluations.npz")):
            match = RUN_NAME.fullmatch(npz.parent.name)
            if match:
                found[(match["env"], npz.parent.parent.name)].append(npz.parent)
    return dict(found)


def warn(message: str) -> None:
    print(f"warning: {message}", file=sys.stderr)


def read_curve(run: Path) -> tuple[np.ndarray, np.ndarray] | None:
    """A run's evaluation env steps [n] and mean return per evaluation [n] from its evaluations.npz; None,
    with a warning naming the file, when it is unreadable or not what rlbench and RL Zoo write."""
    path = run / "evaluations.npz"
    try:
        check_npz_sizes(path)
        with np.load(path, allow_pickle=False) as data:
            timesteps, results = np.asarray(data["timesteps"]), np.asarray(data["results"])
        if timesteps.ndim != 1 or results.ndim != 2 or len(results) != len(timesteps) or results.shape[1] == 0:
            raise ValueError(f"timesteps {timesteps.shape} and results {results.shape}: expected [n] and [n, episodes]")
        if not (np.issubdtype(timesteps.dtype, np.number) and np.issubdtype(results.dtype, np.number)):
            raise ValueError(f"timesteps {timesteps.dtype} and results {results.dtype} are not numbers")
        if np.any(np.diff(timesteps) <= 0):
            raise ValueError("timesteps do not increase")
    except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile) as error:
        warn(f"{path}: unreadable ({' '.join(str(error).split()) or type(error).__name__}); left out")
        return None
    return timesteps, results.mean(axis=1)


def run_curve(run: Path, final: tuple[int, float] | None) -> tuple[np.ndarray, np.ndarray] | None:
    """`read_curve`, with the point `final` at its end when later than its last evaluation (a run with a
    final point and no evaluations.npz has that point alone)."""
    if final is not None and not (run / "evaluations.npz").exists():
        curve: tuple[np.ndarray, np.ndarray] | None = (np.zeros(0, np.int64), np.zeros(0))
    else:
        curve = read_curve(run)
    if curve is None or final is None or (len(curve[0]) and final[0] <= curve[0][-1]):
        return curve
    return np.append(curve[0], final[0]), np.append(curve[1], final[1])


def check_npz_sizes(path: Path) -> None:
    """ValueError unless every member of the archive at `path` declares, inflated and in its .npy header,
    at most MAX_EVALUATIONS_MEMBER_BYTES: np.load would otherwise size its arrays from what the file says."""
    with zipfile.ZipFile(path) as archive:
        for info in archive.infolist():
            if info.file_size > MAX_EVALUATIONS_MEMBER_BYTES:
                raise ValueError(f"{info.filename} declares {info.file_size} bytes, more than evaluations hold")
            with archive.open(info) as member:
                read_header = {(1, 0): np.lib.format.read_array_header_1_0, (2, 0): np.lib.format.read_array_header_2_0}
                version = np.lib.format.read_magic(member)
                if version not in read_header:
                    raise ValueError(f"{info.filename}: .npy format version {version}")
                shape, _, dtype = read_header[version](member)
            if math.prod(shape) * dtype.itemsize > info.file_size:  # Python integers: no overflow
                raise ValueError(
                    f"{info.filename}'s header declares {shape} {dtype}, more than its {info.file_size} bytes"
                )


def load_group(
    env: str, algo: str, runs: list[Path], final_points: Mapping[Path, tuple[int, float]] | None = None
) -> Group | None:
    """The runs' mean evaluation returns aligned by env steps (see the module docstring); None when no
    run has an evaluation yet or the runs share no env steps (with a warning). A run whose evaluations.npz
    is unreadable is left out with a warning naming the file. `final_points[run]`: (env steps, mean
    return) of an evaluation at the run's end (a sweep's), appended when later than its last evaluation."""
    curves = []
    for run in runs:
        curve = run_curve(run, (final_points or {}).get(run))
        if curve is None:
            continue
        if len(curve[0]) == 0:
            warn(f"{run}: no evaluation yet; left out of {env} {algo}")
        else:
            curves.append((run, *curve))
    if not curves:
        return None
    start = max(int(steps[0]) for _, steps, _ in curves)
    end = min(int(steps[-1]) for _, steps, _ in curves)
    ranges = {(int(steps[0]), int(steps[-1])) for _, steps, _ in curves}
    if len(ranges) > 1:
        spans = ", ".join(f"{run.name} {int(steps[0])}-{int(steps[-1])}" for run, steps, _ in curves)
        kept = f"kept only {start}-{end}, the env steps every run reached" if start <= end else "nothing in common"
        warn(f"{env} {algo}: runs cover different env-step ranges ({spans}); {kept}")
    if start > end:
        return None
    grid = np.unique(np.concatenate([steps[(steps >= start) & (steps <= end)] for _, steps, _ in curves]))
    returns = np.array([np.interp(grid, steps, values) for _, steps, values in curves])
    interpolated = any(not np.isin(grid, steps).all() for _, steps, _ in curves)
    return Group(env, algo, grid, returns, [run for run, _, _ in curves], interpolated)


def collect(folders: list[Path]) -> list[Group]:
    groups = (load_group(env, algo, runs) for (env, algo), runs in sorted(find_runs(folders).items()))
    return [g for g in groups if g is not None]


def iqm(values: np.ndarray) -> float:
    """Interquartile mean: the mean of the middle half (a quarter trimmed from each end; rliable's IQM)."""
    from scipy import stats

    return float(stats.trim_mean(values, 0.25))


def confidence_band(returns: np.ndarray, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """95% bootstrap interval of the mean over seeds, per evaluation (degenerate with one seed)."""
    from scipy import stats

    if returns.shape[0] < 2:
        return returns[0], returns[0]
    result = stats.bootstrap(
        (returns,),
        np.mean,
        axis=0,
        confidence_level=0.95,
        n_resamples=2000,
        method="percentile",
        rng=np.random.default_rng(seed),
    )
    return result.confidence_interval.low, result.confidence_interval.high


def final_stats(returns: np.ndarray) -> dict[str, float]:
    final = returns[:, -1]
    stderr = float(final.std(ddof=1) / np.sqrt(len(final))) if len(final) > 1 else 0.0
    return {"mean": float(final.mean()), "stderr": stderr, "iqm": iqm(final), "n": len(final)}


def markdown_table(groups: list[Group]) -> str:
    lines = ["| env | algo | seeds | env steps | final return (mean +/- s.e.) | IQM |", "|---|---|---|---|---|---|"]
    for g in groups:
        s = final_stats(g.returns)
        steps = f"{int(g.timesteps[-1])}" + (" (interpolated)" if g.interpolated else "")
        lines.append(
            f"| {g.env} | {g.algo} | {s['n']} | {steps} | {s['mean']:.1f} +/- {s['stderr']:.1f} | {s['iqm']:.1f} |"
        )
    return "\n".join(lines)


def aggregate_table(groups: list[Group], n_resamples: int = 2000, seed: int = 0) -> str | None:
    """Across envs (rliable-style): final returns normalised per env to [0, 1] by the lowest and highest
    final return of any run of that env in the comparison, then IQM, mean and median per algo with 95%
    stratified bootstrap intervals (seeds resampled within each env). None with fewer than two envs."""
    envs = sorted({g.env for g in groups})
    if len(envs) < 2:
        return None
    bounds = {}
    for env in envs:
        finals = np.concatenate([g.returns[:, -1] for g in groups if g.env == env])
        bounds[env] = (finals.min(), max(finals.max() - finals.min(), 1e-8))
    rng = np.random.default_rng(seed)
    metrics = {"IQM": iqm, "mean": np.mean, "median": np.median}
    lines = ["| algo | envs | " + " | ".join(f"{m} (95% CI)" for m in metrics) + " |", "|---|---|---|---|---|"]
    for algo in sorted({g.algo for g in groups}):
        scores = [(g.returns[:, -1] - bounds[g.env][0]) / bounds[g.env][1] for g in groups if g.algo == algo]
        cells = []
        for fn in metrics.values():
            point = fn(np.concatenate(scores))
            boot = [fn(np.concatenate([rng.choice(s, size=len(s)) for s in scores])) for _ in range(n_resamples)]
            low, high = np.percentile(boot, [2.5, 97.5])
            cells.append(f"{point:.2f} ({low:.2f}, {high:.2f})")
        lines.append(f"| {algo} | {len(scores)} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def plot(
    groups: list[Group],
    output: Path,
    prefix: str = "",
    markers: Mapping[tuple[str, str], Sequence[tuple[int, float]]] | None = None,
) -> list[Path]:
    """One PNG per env, `<output>/<prefix><env>.png`. `markers[(env, algo)]`: (env steps, return) points
    drawn as crosses in the algo's colour (published results)."""
    import matplotlib

    matplotlib.use("Agg")  # files only, never a window
    import matplotlib.pyplot as plt

    output.mkdir(parents=True, exist_ok=True)
    written = []
    for env in sorted({g.env for g in groups}):
        fig, ax = plt.subplots(figsize=(6, 4))
        for g in (g for g in groups if g.env == env):
            low, high = confidence_band(g.returns)
            label = f"{g.algo} (n={len(g.runs)}" + (", interpolated to common env steps)" if g.interpolated else ")")
            (line,) = ax.plot(g.timesteps, g.returns.mean(axis=0), label=label)
            ax.fill_between(g.timesteps, low, high, alpha=0.25)
            points = (markers or {}).get((env, g.algo))
            if points:
                steps, values = zip(*points, strict=True)
                ax.scatter(steps, values, marker="x", color=line.get_color(), label=f"{g.algo} published")
        ax.set(title=env, xlabel="env steps", ylabel="mean eval return")
        ax.legend()
        ax.grid(alpha=0.3)
        path = output / f"{prefix}{env.replace(':', '_')}.png"
        fig.savefig(path, dpi=120, bbox_inches="tight")
        plt.close(fig)
        written.append(path)
    return written


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m rlbench.report.plots", description=__doc__.splitlines()[0])
    p.add_argument("folders", nargs="+", type=Path, help="log folders (the -f of train.py)")
    p.add_argument("-o", "--output", type=Path, default=Path("plots"), help="folder for the PNG files")
    p.add_argument("--table", type=Path, default=None, help="also write the markdown table here")
    args = p.parse_args(argv)
    try:
        missing = [str(folder) for folder in args.folders if not folder.is_dir()]
        if missing:
            raise ConfigError(f"log folder not found: {', '.join(missing)}")
        import_plot_packages()
    except ConfigError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    groups = collect(args.folders)
    if not groups:
        print(f"error: no evaluations.npz under {', '.join(map(str, args.folders))}", file=sys.stderr)
        return 2
    table = markdown_table(groups)
    aggregate = aggregate_table(groups)
    if aggregate is not None:
        table += "\n\nAcross envs (final returns normalised per env by the runs compared):\n\n" + aggregate
    print(table)
    if args.table:
        atomic_write_text(args.table, table + "\n")
    for path in plot(groups, args.output):
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
