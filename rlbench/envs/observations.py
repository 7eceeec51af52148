"""Observation wrappers RL Zoo's hyperparameter files ask for, as rlbench's own per-env wrappers.

- `FrameStack` is RL Zoo's `frame_stack: N` (SB3's VecFrameStack over the vector env): the last N
  observations concatenated on the last axis, oldest first. After a reset the older slots are zeros and
  the newest is the first observation. On the step that ends an episode the stack ends with the true
  final observation: with the vector env's SAME_STEP autoreset that stack is `info["final_obs"]`, which the
  replay buffer stores as next_obs, as VecFrameStack rewrites `terminal_observation`.
- `TimeFeatureWrapper` is SB3-contrib's (`sb3_contrib.common.wrappers.TimeFeatureWrapper`, the name RL
  Zoo's files use and rlbench resolves to this class, see rlbench.envs.wrappers): sb3_contrib imports torch.
  It appends the remaining time 1 - t / max_steps after t steps of the episode.

Both keep the dtype of the observations they wrap.
"""

from __future__ import annotations

from typing import Any, Generic, SupportsFloat, TypeVar

import gymnasium as gym
import numpy as np

ActType = TypeVar("ActType")  # the wrapped env's action, passed on as it is
Step = tuple[np.ndarray, SupportsFloat, bool, bool, dict[str, Any]]


class FrameStack(gym.Wrapper[np.ndarray, ActType, np.ndarray, ActType], Generic[ActType]):
    """The last `n_stack` observations concatenated on the last axis (SB3's VecFrameStack, channels last)."""

    def __init__(self, env: gym.Env[np.ndarray, ActType], n_stack: int):
        super().__init__(env)
        space = env.observation_space
        if not isinstance(space, gym.spaces.Box):
            raise TypeError(f"frame_stack needs a Box observation space, got {space}")
        self.n_stack = n_stack
        self.observation_space = gym.spaces.Box(
            low=np.concatenate([space.low] * n_stack, axis=-1),
            high=np.concatenate([space.high] * n_stack, axis=-1),
            dtype=space.dtype,
        )
        self._stack = np.zeros(self.observation_space.shape, space.dtype)
        self._width = space.shape[-1]  # one observation's slots on the last axis

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        obs, info = self.env.reset(seed=seed, options=options)
        self._stack[...] = 0
        self._stack[..., -self._width :] = obs
        return self._stack.copy(), info

    def step(self, action: ActType) -> Step:
        obs, reward, terminated, truncated, info = self.env.step(action)
        self._stack = np.roll(self._stack, -self._width, axis=-1)
        self._stack[..., -self._width :] = obs
        return self._stack.copy(), reward, terminated, truncated, info


class TimeFeatureWrapper(gym.Wrapper[np.ndarray, ActType, np.ndarray, ActType], Generic[ActType]):
    """A 1-D Box observation with the remaining time 1 - t / max_steps appended (bounds [0, 1]).

    `max_steps` is the env's time limit (its spec's max_episode_steps, which a TimeLimit wrapper sets),
    else the argument (default 1000, as SB3-contrib). With `test_mode` the feature stays 1.0, so a policy
    can be checked for having learned to rely on it.
    """

    def __init__(self, env: gym.Env[np.ndarray, ActType], max_steps: int = 1000, test_mode: bool = False):
        super().__init__(env)
        space = env.observation_space
        if not isinstance(space, gym.spaces.Box) or len(space.shape) != 1:
            raise TypeError(f"TimeFeatureWrapper needs a 1-D Box observation space, got {space}")
        if isinstance(max_steps, bool) or not isinstance(max_steps, int) or max_steps < 1:
            raise ValueError(f"TimeFeatureWrapper: max_steps must be a positive integer, got {max_steps!r}")
        if not isinstance(test_mode, bool):
            raise ValueError(f"TimeFeatureWrapper: test_mode must be True or False, got {test_mode!r}")
        self.observation_space = gym.spaces.Box(
            low=np.append(space.low, 0.0).astype(space.dtype),
            high=np.append(space.high, 1.0).astype(space.dtype),
            dtype=space.dtype,
        )
        limit = env.spec.max_episode_steps if env.spec is not None else None
        self.max_steps = max_steps if limit is None else limit
        self.test_mode = test_mode
        self._steps = 0

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        self._steps = 0
        obs, info = self.env.reset(seed=seed, options=options)
        return self._with_time(obs), info

    def step(self, action: ActType) -> Step:
        self._steps += 1
        obs, reward, terminated, truncated, info = self.env.step(action)
        return self._with_time(obs), reward, terminated, truncated, info

    def _with_time(self, obs: np.ndarray) -> np.ndarray:
        remaining = 1.0 if self.test_mode else 1.0 - self._steps / self.max_steps
        return np.append(obs, np.asarray(remaining, self.observation_space.dtype))
