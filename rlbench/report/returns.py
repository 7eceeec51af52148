"""The returns report: per env and curve (algorithm, system, grid setting), statistics over seeds of the
final evaluation return and of the return at a number of env steps (mean, IQM, 95% bootstrap interval of
the mean, by rliable) beside published results, rliable's comparison of the curves
(rlbench.report.statistics), learning curves and a performance profile. `python -m rlbench.bench returns`
and sweeps (rlbench.sweep) write it.
"""

from __future__ import annotations

import os
import platform
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

import numpy as np

from rlbench.files import atomic_write_text
from rlbench.report import plots, statistics
from rlbench.report.escaping import as_markdown


class Reference(NamedTuple):
    """A published mean return at a number of env steps (`spread`: the ± printed with it, if any)."""

    value: float
    source: str
    spread: float | None = None


SIMBA_STEPS = (100_000, 300_000, 1_000_000)


def _simba(
    csv: str, values: Sequence[float], spreads: Sequence[float | None] = (None, None, None)
) -> dict[int, Reference]:
    source = f"SimbaV2 results/baseline/{csv}.csv"
    return {steps: Reference(v, source, s) for steps, v, s in zip(SIMBA_STEPS, values, spreads, strict=True)}


# ../shared/REFERENCE.md, "Published results and speeds", 1a and 1c. DroQ is SimbaV2's droq_utd20.
REFERENCES: dict[tuple[str, str], dict[int, Reference]] = {
    ("HalfCheetah-v4", "sac"): _simba("sac", (6156, 8593, 11327)),
    ("HalfCheetah-v4", "crossq"): _simba("crossq", (8058, 10132, 12756), (889, 1122, 1678)),
    ("HalfCheetah-v4", "droq"): _simba("droq_utd20", (7744, 9464, 11050)),
    ("Hopper-v4", "sac"): _simba("sac", (1103, 2160, 2617)),
    ("Hopper-v4", "crossq"): _simba("crossq", (2759, 2669, 2426), (379, 225, 403)),
    ("Hopper-v4", "droq"): _simba("droq_utd20", (1813, 2443, 2769)),
    ("Walker2d-v4", "sac"): _simba("sac", (690, 2470, 4554)),
    ("Walker2d-v4", "crossq"): _simba("crossq", (3486, 5320, 6377), (1056, 761, 665)),
    ("Walker2d-v4", "droq"): _simba("droq_utd20", (2277, 4061, 4714)),
    ("Ant-v4", "sac"): _simba("sac", (747, 3532, 5616)),
    ("Ant-v4", "crossq"): _simba("crossq", (2686, 5593, 6905), (946, 958, 355)),
    ("Ant-v4", "droq"): _simba("droq_utd20", (1365, 4783, 5969)),
    ("Humanoid-v4", "sac"): _simba("sac", (632, 3015, 4744)),
    ("Humanoid-v4", "crossq"): _simba("crossq", (3184, 8241, 10069), (1068, 657, 417)),
    ("Humanoid-v4", "droq"): _simba("droq_utd20", (1278, 5237, 5339)),
    ("Pendulum-v1", "sac"): {20_000: Reference(-156.995, "RL Zoo benchmark.md (hyperparams/sac.yml)", 88.714)},
}


@dataclass(frozen=True)
class Summary:
    """Statistics over seeds of one return per seed."""

    n: int
    mean: float
    iqm: float
    low: float  # 95% percentile-bootstrap interval of the mean
    high: float

    @classmethod
    def of(cls, values: np.ndarray) -> Summary:
        iqm, mean = statistics.iqm_and_mean(values[:, None])
        return cls(len(values), mean.point, iqm.point, mean.low, mean.high)

    def cells(self) -> str:
        interval = f"({self.low:.1f}, {self.high:.1f})" if self.n > 1 else "n/a (1 seed)"
        return f"{self.mean:.1f} | {self.iqm:.1f} | {interval}"


def eval_index_at(timesteps: np.ndarray, steps: int) -> int | None:
    """Index of the last evaluation at or below `steps` env steps; None if there is none."""
    index = int(np.searchsorted(timesteps, steps, side="right")) - 1
    return index if index >= 0 else None


def reference_cells(env: str, algo: str, steps: int | None) -> str:
    ref = REFERENCES.get((env, algo), {}).get(steps) if steps is not None else None
    if ref is None:
        return "- | -"
    spread = f" ± {ref.spread:g}" if ref.spread is not None else ""
    return f"{ref.value:g}{spread} | {ref.source}"


def returns_tables(groups: list[plots.Group], n_timesteps: Mapping[tuple[str, str], int], at_steps: int) -> str:
    """`n_timesteps[(env, curve label)]`: the env steps of the curve's runs."""
    head = "| env | algo | seeds | {} | mean | IQM | 95% CI of the mean | published | source |\n" + "|---" * 9 + "|"
    final = [head.format("env steps")]
    at = [head.format("eval at")]
    for g in groups:
        steps, curve = int(g.timesteps[-1]), f"{as_markdown(g.env)} | {as_markdown(g.label)}"
        final.append(
            f"| {curve} | {len(g.runs)} | {steps} | {Summary.of(g.returns[:, -1]).cells()} | "
            f"{reference_cells(g.env, g.algo, steps)} |"
        )
        index = eval_index_at(g.timesteps, at_steps)
        if n_timesteps[(g.env, g.label)] < at_steps or index is None:
            stats = "n/a | n/a | n/a | n/a"  # the runs are shorter
        else:
            stats = f"{int(g.timesteps[index])} | {Summary.of(g.returns[:, index]).cells()}"
        at.append(f"| {curve} | {len(g.runs)} | {stats} | {reference_cells(g.env, g.algo, at_steps)} |")
    return (
        "## Final evaluation return\n\n" + "\n".join(final) + "\n\n"
        f"## Evaluation return at {at_steps} env steps\n\n"
        f"The last evaluation at or below {at_steps} env steps of each run; n/a for shorter runs.\n\n"
        + "\n".join(at)
        + "\n"
    )


def machine_line() -> str:
    """CPU model, cores and versions (speed.py's `machine()` gives the same facts as JSON)."""
    import gymnasium
    import jax

    return (
        f"{cpu_model()}, {os.cpu_count()} cores; Python {platform.python_version()}, JAX {jax.__version__} "
        f"({jax.default_backend()}), gymnasium {gymnasium.__version__}"
    )


def write_report(
    groups: list[plots.Group],
    n_timesteps: Mapping[tuple[str, str], int],
    at_steps: int,
    output: Path,
    intro: Sequence[str],
    runs: str,
) -> Path:
    """`output` (markdown): `intro`, the two returns tables, rliable's comparison of the curves (its
    performance profile in `<output stem>_performance_profile.png`), the learning curves (one PNG per env,
    `<output stem>_<env>.png` beside it, published results marked within the curves' range) and `runs`."""
    reach = {g.env: max(int(h.timesteps[-1]) for h in groups if h.env == g.env) for g in groups}
    markers = {
        (g.env, g.algo): [
            (steps, ref.value) for steps, ref in REFERENCES.get((g.env, g.algo), {}).items() if steps <= reach[g.env]
        ]
        for g in groups
    }
    output.parent.mkdir(parents=True, exist_ok=True)
    pngs = plots.plot(groups, output.parent, prefix=f"{output.stem}_", markers=markers)
    scores = [g.scores() for g in groups]
    profile = statistics.plot_profile(scores, output.parent / f"{output.stem}_{plots.PROFILE_FILE}")
    lines = [
        *intro,
        returns_tables(groups, n_timesteps, at_steps),
        "## Comparisons (rliable)",
        "",
        *statistics.comparison_section(scores),
        "",
        *([f"Performance profile: ![performance profile]({profile.name})", ""] if profile else []),
        "## Learning curves",
        "",
        "Mean over seeds with a 95% bootstrap band; crosses: published results.",
        "",
        *(f"![{png.stem.removeprefix(output.stem + '_')}]({png.name})" for png in pngs),
        "",
        "## Runs",
        "",
        runs,
    ]
    atomic_write_text(output, "\n".join(lines))
    return output


def cpu_model() -> str:
    """The CPU's model name (Linux /proc/cpuinfo), for the machine line of every benchmark's output."""
    try:
        return next(
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("model name")
        )
    except (OSError, StopIteration):
        return platform.processor() or "unknown CPU"
