"""Type definitions shared across the package (no logic)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal, NamedTuple

import jax
import numpy as np

# A JAX pytree whose structure varies (an env's state, a learner's state, a network's parameters): nested
# tuples, lists, dicts and registered nodes of arrays. JAX itself types pytrees as Any; this alias names them.
PyTree = Any
Params = Mapping[str, Any]
# --vec-env: the training envs in this process (gymnasium's SyncVectorEnv) or one subprocess each (AsyncVectorEnv).
VecEnvKind = Literal["dummy", "subproc", "envpool", "envpool-xla"]
Metrics = dict[str, jax.Array]


class Transition(NamedTuple):
    """A batch of transitions. Actions are in [-1, 1]; `terminated` is 1.0 only for true terminal states.

    Truncation (time limits) never reaches the learner: a truncated transition is stored with
    terminated = 0 and its true final observation as `next_obs`, so the target bootstraps from it.
    """

    obs: jax.Array  # [..., obs_dim]
    action: jax.Array  # [..., action_dim]
    reward: jax.Array  # [...]
    next_obs: jax.Array  # [..., obs_dim]
    terminated: jax.Array  # [...] float 0/1
    # [...] float 0/1, ended by a time limit and not terminated: staged only for on-policy learners, whose
    # advantages stop at every episode end (GAE); None elsewhere (a replay buffer keeps no such column).
    truncated: jax.Array | None = None


class EnvSpec(NamedTuple):
    """What the learner needs to know about an environment: flat observation and action sizes.

    A Discrete action space of n actions is one action column holding the index (as a float, the loop's
    action dtype): action_dim 1 and n_actions n. A Box has n_actions 0. An image observation
    (rlbench.envs.images) travels flat as uint8 (obs_dim = its pixels) and `image_shape` is its
    [height, width, channels]; every other observation travels as float32 and has image_shape ()."""

    obs_dim: int
    action_dim: int
    n_actions: int = 0
    image_shape: tuple[int, ...] = ()

    @property
    def discrete(self) -> bool:
        return self.n_actions > 0

    @property
    def obs_dtype(self) -> type[np.uint8] | type[np.float32]:
        """The observations' dtype in the loops, the replay buffer, the rollout and a checkpoint."""
        return np.uint8 if self.image_shape else np.float32
