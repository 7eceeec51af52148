"""The statistics of a comparison, by rliable (Agarwal et al., NeurIPS 2021): per env and across envs, the
IQM and mean over seeds with stratified-bootstrap 95% intervals, the probability of improvement of one
curve over another with its interval and a sentence saying it in plain words, and a performance profile.

rliable draws its resamples from numpy's global generator (`np.random.choice`), so every bootstrap here
runs seeded and puts the generator's state back after: a report is the same each time it is written.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import NamedTuple, Protocol, TypeVar

import numpy as np
import numpy.typing as npt

from rlbench.errors import ConfigError
from rlbench.report.escaping import as_markdown, as_plot_text

FloatArray = npt.NDArray[np.float64]  # returns, normalised scores, estimates
REPS = 2000  # bootstrap resamples: read when called, so a caller (or a test) can ask for fewer
SEED = 0
CONFIDENCE = 0.95
# Two runs that beat two others every time give a bootstrap interval of [1, 1] (every resample separates
# them too), though 1 in 6 orderings of four runs would: below three runs a side, no verdict.
MIN_RUNS = 3
PROFILE_POINTS = 51  # thresholds of the performance profile, over the normalised scores' [0, 1]


class Estimate(NamedTuple):
    """A point estimate and its 95% interval."""

    point: float
    low: float
    high: float

    def text(self, digits: int = 2) -> str:
        return f"{self.point:.{digits}f} [{self.low:.{digits}f}, {self.high:.{digits}f}]"


@dataclass(frozen=True)
class Scores:
    """The final evaluation returns of one curve's runs on one env; `label` names the curve (system, algo,
    setting), `steps` the env steps of that evaluation."""

    env: str
    label: str
    algo: str
    steps: int
    values: FloatArray  # [runs]


def import_rliable() -> tuple[ModuleType, ModuleType]:
    """rliable's `library` and `metrics` modules; a ConfigError with the install line when missing."""
    try:
        from rliable import library, metrics
    except ImportError as error:
        raise ConfigError(
            f'reports need rliable ({error}): pip install -e ".[plots]" (or pip install rliable)'
        ) from None
    return library, metrics


@contextmanager
def seeded(seed: int) -> Iterator[None]:
    state = np.random.get_state()
    np.random.seed(seed)
    try:
        yield
    finally:
        np.random.set_state(state)


def interval_estimate(
    scores: FloatArray | list[FloatArray],
    function: Callable[..., FloatArray],
    reps: int | None = None,
    seed: int = SEED,
) -> tuple[FloatArray, FloatArray]:
    """rliable's stratified bootstrap (percentile) of `function` over `scores` ([runs, envs, ...], or a list
    of such arrays resampled independently): the point estimate and its [2, ...] interval."""
    library, _ = import_rliable()
    with seeded(seed):
        points, intervals = library.get_interval_estimates(
            {"scores": scores}, function, reps=reps or REPS, confidence_interval_size=CONFIDENCE
        )
    return np.asarray(points["scores"]), np.asarray(intervals["scores"])


def iqm_and_mean(scores: FloatArray, reps: int | None = None, seed: int = SEED) -> tuple[Estimate, Estimate]:
    """rliable's aggregate IQM (the mean of the middle half of all runs' scores) and mean (of the per-env
    means) of `scores` [runs, envs], each with its 95% stratified-bootstrap interval. Remembered: a report
    asks for the same final returns' estimates in its returns table and in its comparison."""
    key = (scores.shape, scores.astype(np.float64).tobytes(), reps or REPS, seed)
    if key not in _estimates:
        _estimates[key] = _iqm_and_mean(scores, reps, seed)
    return _estimates[key]


_estimates: dict[
    tuple[tuple[int, ...], bytes, int, int], tuple[Estimate, Estimate]
] = {}  # seeded, so the same arguments give the same answer


def _iqm_and_mean(scores: FloatArray, reps: int | None, seed: int) -> tuple[Estimate, Estimate]:
    _, metrics = import_rliable()

    def both(values: FloatArray) -> FloatArray:
        return np.array([metrics.aggregate_iqm(values), metrics.aggregate_mean(values)])

    point, bounds = interval_estimate(scores, both, reps, seed)
    iqm, mean = (Estimate(float(point[i]), float(bounds[0, i]), float(bounds[1, i])) for i in range(2))
    return iqm, mean


def mean_band(returns: FloatArray, reps: int | None = None, seed: int = SEED) -> tuple[FloatArray, FloatArray]:
    """The 95% bootstrap interval of the mean over seeds of `returns` [runs, points], at each point."""
    if returns.shape[0] < 2:
        return returns[0], returns[0]
    _, bounds = interval_estimate(returns[:, None, :], lambda values: values.mean(axis=(0, 1)), reps, seed)
    return bounds[0], bounds[1]


def probability_of_improvement(x: FloatArray, y: FloatArray, reps: int | None = None, seed: int = SEED) -> Estimate:
    """rliable's P(X > Y) of `x` [runs_x, envs] over `y` [runs_y, envs] (a run of X beats a run of Y, ties
    half, averaged over envs), with its 95% interval (each side resampled within each env)."""
    _, metrics = import_rliable()
    point, bounds = interval_estimate([x, y], metrics.probability_of_improvement, reps, seed)
    low, high = bounds.reshape(2)
    return Estimate(float(point), float(low), float(high))


def verdict(first: str, second: str, estimate: Estimate, runs: int) -> str:
    """The comparison in words: detectable only when the interval excludes 0.5, and with `runs` (the fewer
    seeds of the two sides) at least MIN_RUNS."""
    if runs < MIN_RUNS:
        return f"too few seeds to tell ({runs} on one side, a verdict needs {MIN_RUNS} or more on each)"
    if estimate.low > 0.5:
        return f"{first} better"
    if estimate.high < 0.5:
        return f"{second} better"
    return "no detectable difference"


def sentence(first: str, second: str, where: str, estimate: Estimate, runs: int) -> str:
    """E.g. "rlbench sac vs SBX sac on HalfCheetah-v4 at 50k: P(improvement) 0.48 [0.21, 0.75], no
    detectable difference"; `runs`: the fewer seeds of the two sides."""
    return f"{first} vs {second} {where}: P(improvement) {estimate.text()}, {verdict(first, second, estimate, runs)}"


def steps_text(steps: int) -> str:
    for size, suffix in ((1_000_000, "M"), (1_000, "k")):
        if steps >= size and steps % (size // 10) == 0:
            return f"{steps / size:g}{suffix}"
    return str(steps)


class _OfAnAlgo(Protocol):
    @property
    def algo(self) -> str: ...


Curve = TypeVar("Curve", bound=_OfAnAlgo)  # Scores (one env) or Across (every env)


def compared_pairs(curves: Sequence[Curve]) -> list[tuple[Curve, Curve]]:
    """The pairs compared: the curves of one algorithm against each other (systems, settings, folders), or,
    where every algorithm has one curve, each algorithm against each other."""
    by_algo: dict[str, list[Curve]] = {}
    for curve in curves:
        by_algo.setdefault(curve.algo, []).append(curve)
    if all(len(members) == 1 for members in by_algo.values()):
        return list(itertools.combinations(curves, 2))
    return [pair for members in by_algo.values() for pair in itertools.combinations(members, 2)]


def pair_sentence(first: Scores, second: Scores, reps: int | None, seed: int) -> str:
    steps = steps_text(first.steps) if first.steps == second.steps else f"{first.steps} and {second.steps} env steps"
    estimate = probability_of_improvement(first.values[:, None], second.values[:, None], reps, seed)
    runs = min(len(first.values), len(second.values))
    return sentence(
        as_markdown(first.label), as_markdown(second.label), f"on {as_markdown(first.env)} at {steps}", estimate, runs
    )


def estimate_cells(scores: FloatArray, reps: int | None, seed: int) -> str:
    digits = 2 if np.abs(scores).max() <= 10 else 1  # normalised scores, or returns
    if scores.shape[0] < 2:
        value = f"{float(scores.mean()):.{digits}f} (n/a, 1 seed)"
        return f"{value} | {value}"
    iqm, mean = iqm_and_mean(scores, reps, seed)
    return f"{iqm.text(digits)} | {mean.text(digits)}"


@dataclass(frozen=True)
class Across:
    """One curve's normalised final returns on every env compared: [runs, envs]."""

    label: str
    algo: str
    values: FloatArray


def normalised(curves: Sequence[Scores]) -> tuple[list[Across], list[str]]:
    """Each curve's final returns on every env, normalised per env to [0, 1] by the lowest and highest final
    return of any run compared on that env (min-max over the compared runs: raw returns of different envs
    are not comparable); and the labels left out, those missing an env or with different seed counts."""
    envs = sorted({curve.env for curve in curves})
    bounds = {}
    for env in envs:
        values = np.concatenate([curve.values for curve in curves if curve.env == env])
        bounds[env] = (values.min(), max(values.max() - values.min(), 1e-8))
    across, left_out = [], []
    for label in dict.fromkeys(curve.label for curve in curves):
        members = {curve.env: curve for curve in curves if curve.label == label}
        if len(members) != len(envs) or len({len(curve.values) for curve in members.values()}) != 1:
            left_out.append(label)
            continue
        matrix = np.stack([(members[env].values - bounds[env][0]) / bounds[env][1] for env in envs], axis=1)
        across.append(Across(label, next(iter(members.values())).algo, matrix))
    return across, left_out


def per_env_lines(curves: Sequence[Scores], reps: int | None, seed: int) -> list[str]:
    lines = ["| env | curve | seeds | env steps | IQM (95% CI) | mean (95% CI) |", "|---" * 6 + "|"]
    for curve in curves:
        cells = estimate_cells(curve.values[:, None], reps, seed)
        lines.append(
            f"| {as_markdown(curve.env)} | {as_markdown(curve.label)} | {len(curve.values)} | {curve.steps} | {cells} |"
        )
    lines.append("")
    for env in dict.fromkeys(curve.env for curve in curves):
        pairs = compared_pairs([curve for curve in curves if curve.env == env])
        lines += [f"- {pair_sentence(first, second, reps, seed)}" for first, second in pairs]
    return lines


def across_env_lines(across: Sequence[Across], left_out: Sequence[str], reps: int | None, seed: int) -> list[str]:
    lines = [
        "Across envs: each env's final returns normalised to [0, 1] by the lowest and highest final return of "
        "any run compared on that env (min-max over the compared runs); IQM over all runs and envs, mean of "
        "the per-env means, P(improvement) averaged over envs.",
        "",
        "| curve | envs | seeds | IQM (95% CI) | mean (95% CI) |",
        "|---" * 5 + "|",
    ]
    for curve in across:
        runs, envs = curve.values.shape
        lines.append(f"| {as_markdown(curve.label)} | {envs} | {runs} | {estimate_cells(curve.values, reps, seed)} |")
    lines.append("")
    for first, second in compared_pairs(across):
        estimate = probability_of_improvement(first.values, second.values, reps, seed)
        runs = min(len(first.values), len(second.values))
        where = f"over {first.values.shape[1]} envs (normalised)"
        lines.append(f"- {sentence(as_markdown(first.label), as_markdown(second.label), where, estimate, runs)}")
    if left_out:
        left_out_text = as_markdown(", ".join(left_out))
        lines += ["", f"Left out across envs (not on every env, or other seed counts): {left_out_text}"]
    return lines


def comparison_section(curves: Sequence[Scores], reps: int | None = None, seed: int = SEED) -> list[str]:
    """The markdown lines of the comparison: per env, then across envs when there are several."""
    lines = [
        "Final evaluation return of each run, by rliable (Agarwal et al. 2021): per curve the IQM (mean of the "
        "middle half) and mean over seeds with 95% stratified-bootstrap intervals "
        f"({reps or REPS} resamples, seed {seed}). P(improvement) of A over B: the chance that a run of A "
        "beats a run of B (ties half), with its 95% interval; a difference is detectable only when the "
        "interval excludes 0.5. Compared: the curves of one algorithm against each other (systems, settings, "
        "folders), or each algorithm against each other where each has one curve.",
        "",
        *per_env_lines(curves, reps, seed),
    ]
    across, left_out = normalised(curves)
    if len({curve.env for curve in curves}) > 1:
        lines += ["", *across_env_lines(across, left_out, reps, seed)]
    return lines


def fraction_above(scores: FloatArray, thresholds: FloatArray) -> FloatArray:
    """rliable's score distribution (the fraction of runs scoring above each threshold), vectorised."""
    return (scores[..., None] > thresholds).mean(axis=tuple(range(scores.ndim)))


def plot_profile(curves: Sequence[Scores], path: Path, reps: int | None = None, seed: int = SEED) -> Path | None:
    """rliable's performance profile of the normalised final returns (those `normalised` keeps), with its
    95% bands, as a PNG at `path`; None when no curve is on every env."""
    across, _ = normalised(curves)
    if not across:
        return None
    library, _ = import_rliable()
    thresholds = np.linspace(0.0, 1.0, PROFILE_POINTS)
    with seeded(seed):
        profiles, bands = library.create_performance_profile(
            {as_plot_text(curve.label): curve.values for curve in across},
            thresholds,
            custom_profile_func=fraction_above,
            reps=reps or REPS,
            confidence_interval_size=CONFIDENCE,
        )
    import matplotlib

    matplotlib.use("Agg")  # files only, never a window
    import matplotlib.pyplot as plt
    from rliable import plot_utils

    fig, ax = plt.subplots(figsize=(6, 4))
    plot_utils.plot_performance_profiles(
        profiles,
        thresholds,
        performance_profile_cis=bands,
        ax=ax,
        xlabel=r"normalised final return $\tau$ (min-max over the compared runs, per env)",
        ylabel=r"fraction of runs with score $> \tau$",
        labelsize="medium",
        ticklabelsize="medium",
    )
    ax.legend(loc="lower left", fontsize="small")
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120, bbox_inches="tight")
    plt.close(fig)
    return path
