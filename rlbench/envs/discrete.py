"""Discrete action spaces as rlbench's learners see them: one action column holding the action's index.

The loop hands every env a float32 array [action_dim]; for a `Discrete(n)` env that is [1], the index of
the action. `IndexActions` turns the env's space into `Box(0, n-1, (1,), int64)` and each index back into
the env's own action. The integer dtype of that Box is what says "discrete" from here on: in the
manifest's spaces (rlbench.run.probe.describe_space records it), in `EnvSpec.n_actions` (`action_count`),
and in the checks of a manifest read back (rlbench.store.schema). rlbench builds no other integer action
space: an integer Box is refused where envs are built (rlbench.envs.make).
"""

from __future__ import annotations

from collections.abc import Sequence

import gymnasium as gym
import numpy as np
import numpy.typing as npt

# The index travels in a float32 action column, which holds every integer exactly only up to 2**24.
MAX_ACTIONS = 2**24
INTEGER_DTYPES = ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64")


class IndexActions(gym.ActionWrapper):
    """A `Discrete(n, start=s)` env that takes its action as an index in [0, n-1] (a float array [1], or a
    scalar) and steps the env with action s + index. An index that is not one of the n is a bug of the
    caller (a learner's sample is always one): ValueError, not a clipped or wrapped action."""

    def __init__(self, env: gym.Env):
        super().__init__(env)
        space = env.action_space
        if not isinstance(space, gym.spaces.Discrete):
            raise TypeError(f"IndexActions wraps a Discrete action space, got {space}")
        self.n, self.start = int(space.n), int(space.start)
        self.action_space = index_space(self.n)

    def action(self, action: npt.ArrayLike) -> np.int64:
        values = np.asarray(action, np.float64)
        if values.size != 1:
            raise ValueError(f"a Discrete({self.n}) action is one index, got an array of shape {values.shape}")
        return np.int64(self.start + int(action_indices(values.reshape(1), self.n)[0]))


def action_indices(values: npt.ArrayLike, n: int) -> npt.NDArray[np.int64]:
    """Each value of an index column as the integer index it holds; ValueError for one that is not one of
    Discrete(n)'s 0..n-1 (NaN included): a learner's sample is always one, so another is a caller's bug."""
    rounded = np.rint(np.asarray(values, np.float64))
    outside = ~((rounded >= 0) & (rounded < n))  # NaN is outside too
    if outside.any():
        bad = np.asarray(values).ravel()[np.flatnonzero(outside.ravel())[0]]
        raise ValueError(f"action index {bad} is not one of Discrete({n})'s 0..{n - 1}")
    return rounded.astype(np.int64)


def index_space(n: int) -> gym.spaces.Box:
    """The action space of a Discrete(n) env's index, as the loop and the manifest see it."""
    return gym.spaces.Box(low=0, high=n - 1, shape=(1,), dtype=np.int64)


def action_count(dtype: str, high: Sequence[float] | np.ndarray) -> int:
    """n_actions of an action space given its dtype's name and its (flattened) upper bounds: high + 1 for
    the index space of a Discrete env (an integer dtype), 0 for a Box."""
    return int(high[0]) + 1 if dtype in INTEGER_DTYPES else 0
