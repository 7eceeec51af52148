"""Learning-rate schedules as data, evaluated inside the jitted update from the training progress.

`progress_remaining` goes from 1 at the start of training to 0 at the end (SB3's convention), so RL
Zoo's `lin_7.3e-4` means `LinearSchedule(7.3e-4)`: 7.3e-4 at the start, decaying linearly to 0.
"""

from __future__ import annotations

from dataclasses import dataclass

import jax
import jax.numpy as jnp


@dataclass(frozen=True)
class ConstantSchedule:
    value: float

    def __call__(self, progress_remaining: jax.Array) -> jax.Array:
        return jnp.full_like(progress_remaining, self.value)

    @property
    def initial(self) -> float:
        return self.value


@dataclass(frozen=True)
class LinearSchedule:
    start: float

    def __call__(self, progress_remaining: jax.Array) -> jax.Array:
        return self.start * progress_remaining

    @property
    def initial(self) -> float:
        return self.start


Schedule = ConstantSchedule | LinearSchedule
