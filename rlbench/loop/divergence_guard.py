"""Divergence checks of a run's learner states, where the metrics come to the host anyway.

At log intervals, evaluations and checkpoints the loop fetches the last training metrics; `DivergenceGuard`
then checks them and each training seed's learner state for NaN and inf (one compiled reduction, one flag
per seed: rlbench.loop.compiled), and keeps a device copy of the state at the last passing check: what a
checkpoint written after a divergence holds instead of the diverged state, and what a frozen seed is put
back to. What the loop does about a divergence is rlbench.loop.divergence's.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import jax
import numpy as np
import numpy.typing as npt

from rlbench.algos.common.divergence import non_finite_paths
from rlbench.algos.common.seed_axis import SeedAxis
from rlbench.errors import DivergenceError
from rlbench.loop import compiled
from rlbench.store.host_state import host_metrics
from rlbench.types import PyTree


@dataclass
class Verified:
    """The learner state at the last passing check (a device copy, with the seed axis), with its metrics."""

    env_steps: int
    state: PyTree
    metrics: dict[str, np.ndarray]  # [n_seeds] each


class DivergenceGuard:
    def __init__(self, axis: SeedAxis):
        self.axis = axis
        self.all_finite = compiled.all_finite_per_seed(axis.n_seeds)
        self.copy = compiled.device_copy
        self._verified: Verified | None = None

    @property
    def verified(self) -> Verified:
        """The learner state at the last passing check (`start`'s, until a later check passes)."""
        assert self._verified is not None, "DivergenceGuard.start checks the state a run starts from first"
        return self._verified

    def start(self, env_steps: int, state: PyTree, metrics: Mapping[str, jax.Array | np.ndarray]) -> None:
        """The state a run starts from is the first verified one: checked too, so that no message or divergence
        checkpoint calls a state finite that never was (a resumed one is checked before the run starts)."""
        finite = np.asarray(self.axis.host(self.all_finite(state)), bool).reshape(-1)
        if not finite.all():
            paths = non_finite_paths(self.axis.take(state, int(np.argmin(finite))))
            raise DivergenceError(f"the learner state the run starts from holds NaN or inf ({', '.join(paths[:3])})")
        self._verified = Verified(env_steps, self.copy(state), host_metrics(metrics))

    def check(
        self,
        env_steps: int,
        state: PyTree,
        metrics: Mapping[str, jax.Array | np.ndarray],
        training: npt.NDArray[np.bool_],
    ) -> tuple[dict[str, np.ndarray], dict[int, str]]:
        """The metrics on the host ([n_seeds] each), and a message for each training seed whose state or
        metrics hold NaN or inf. When none does, the state becomes the last verified one."""
        values = host_metrics(metrics)
        finite = self.axis.host(self.all_finite(state))
        diverged = {}
        for index, seed_trains in enumerate(training):
            # NaN metrics are normal: an iteration without an actor step reports NaN actor losses.
            infinite = [name for name, value in values.items() if np.isinf(value[index])]
            if seed_trains and (not finite[index] or infinite):
                diverged[index] = self.message(env_steps, state, index, infinite)
        if not diverged and self.verified.env_steps != env_steps:
            self._verified = Verified(env_steps, self.copy(state), values)
        return values, diverged

    def message(self, env_steps: int, state: PyTree, index: int, infinite: list[str]) -> str:
        paths = non_finite_paths(self.axis.take(state, index))
        where = [", ".join(infinite)] if infinite else []
        if paths:
            where.append(
                f"learner state {', '.join(paths[:3])}"
                + (f" and {len(paths) - 3} more arrays" if len(paths) > 3 else "")
            )
        verified = {name: value[index] for name, value in self.verified.metrics.items()}
        # NaN: no actor step in that iteration
        last = ", ".join(f"{name}={value:.4g}" for name, value in verified.items() if not np.isnan(value))
        return (
            f"training diverged at env step {env_steps}: non-finite {'; '.join(where)}. Last finite check at "
            f"env step {self.verified.env_steps}: {last or 'none logged yet'}. Lower learning_rate, or check "
            "the env's rewards"
        )
