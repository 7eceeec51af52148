"""One JaxEnv as a gymnasium env, for the host loop (an explicit host-loop run, the device loop's equivalence
test), enjoy.py's replay and --record.

It steps through the very functions the device loop uses (rlbench.envs.jax_native.vector's reset_envs and
step_envs_in_bounds, jitted, on an env axis of one), so the two compute the same transitions: the same key
chain from `reset(seed=s)`, the same time limit (returned as `truncated` here: no TimeLimit wrapper), and
after an episode end, gymnasium's unseeded `reset()` (SAME_STEP autoreset calls it) returns the episode
the device loop's step already started, from the next start the env carried (vector.NextStart).
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable
from typing import Any

import gymnasium as gym
import jax
import numpy as np
import numpy.typing as npt
from gymnasium.envs.registration import EnvSpec

from rlbench.envs.jax_native.env import JaxEnv
from rlbench.envs.jax_native.vector import EnvCarry, EnvStep, reset_envs, restart_envs, step_envs_in_bounds
from rlbench.errors import ConfigError

SEEDS = 2**32  # reset_envs reads seeds as uint32: rlbench's seeds (store.schema.MAX_SEED) all fit


class JaxGymEnv(gym.Env):
    # An instance variable as gymnasium.Env declares it (a ClassVar would not override it), set on the class.
    metadata: dict[str, Any] = {"render_modes": ["rgb_array"], "render_fps": 30}  # noqa: RUF012

    def __init__(self, jax_env: JaxEnv, render_mode: str | None = None):
        if render_mode == "human":  # enjoy.py's default: these envs draw frames, they open no window
            warnings.warn(f"{jax_env.env_id} has no window to render in; playing without one", stacklevel=2)
            render_mode = None
        if render_mode is not None and (render_mode != "rgb_array" or jax_env.render is None):
            raise ConfigError(
                f"{jax_env.env_id} cannot render in mode {render_mode!r}"
                + ("" if jax_env.render else " (Brax's and Playground's envs render through MuJoCo; gymnax's do not)")
            )
        self.jax_env = jax_env
        self.render_mode = render_mode
        self.observation_space, self.action_space = jax_env_spaces(jax_env)
        # A spec with the time limit, as gym.make's: TimeFeatureWrapper reads max_episode_steps there.
        self.spec = EnvSpec(
            id=jax_env.env_id, entry_point=f"{__name__}:JaxGymEnv", max_episode_steps=jax_env.max_episode_steps
        )
        self._reset, self._restart, self._step = _compiled(jax_env)
        self._carry: EnvCarry | None = None
        self._ended = False  # the last step ended an episode: the carry already holds the next one

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        super().reset(seed=seed)
        if seed is not None:
            if not 0 <= seed < SEEDS:
                raise ValueError(f"{self.jax_env.env_id}: seed {seed} is outside [0, 2**32)")
            self._carry = self._reset(np.array([seed], np.uint32))
        elif self._carry is None:  # never seeded: a seed from gymnasium's own RNG
            self._carry = self._reset(self.np_random.integers(SEEDS, size=1).astype(np.uint32))
        elif not self._ended:
            self._carry = self._restart(self._carry)
        self._ended = False
        return np.array(self._carry.obs[0]), {}

    def step(self, action: npt.ArrayLike) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        if self._carry is None:
            raise gym.error.ResetNeeded("call reset() before step()")
        actions = np.asarray(action, np.float32).reshape(1, self.jax_env.spec.action_dim)
        # After an end without a reset (gymnasium allows it), the env continues in the episode already started.
        self._carry, out = self._step(self._carry, actions)
        out = jax.device_get(out)  # one transfer; indexing the device arrays would launch an op each
        terminated, truncated = bool(out.terminated[0]), bool(out.truncated[0])
        self._ended = terminated or truncated
        return np.array(out.final_obs[0]), float(out.reward[0]), terminated, truncated, {}

    def render(self) -> np.ndarray | None:
        if self.render_mode is None or self._carry is None:
            return None
        assert self.jax_env.render is not None, "__init__ refuses a render mode for an env that draws no frames"
        state = jax.tree.map(lambda leaf: leaf[0], self._carry.state)
        return np.asarray(self.jax_env.render(state))


def jax_env_spaces(jax_env: JaxEnv) -> tuple[gym.spaces.Box, gym.spaces.Box | gym.spaces.Discrete]:
    """(observation space: unbounded flat float32, action space: the env's bounds, or Discrete(n): the host
    loop wraps it as any Discrete env, rlbench.envs.discrete.IndexActions)."""
    observation_space = gym.spaces.Box(-np.inf, np.inf, (jax_env.spec.obs_dim,), np.float32)
    if jax_env.spec.discrete:
        return observation_space, gym.spaces.Discrete(jax_env.spec.n_actions)
    return observation_space, gym.spaces.Box(jax_env.action_low, jax_env.action_high, dtype=np.float32)


@functools.lru_cache(maxsize=64)  # a JaxEnv hashes by identity: one set of jitted functions per env
def _compiled(
    jax_env: JaxEnv,
) -> tuple[
    Callable[[np.ndarray], EnvCarry],
    Callable[[EnvCarry], EnvCarry],
    Callable[[EnvCarry, np.ndarray], tuple[EnvCarry, EnvStep]],
]:
    """The vector functions of `jax_env` jitted, on an env axis of one: reset(seeds), restart(carry),
    step(carry, actions)."""
    return (
        jax.jit(lambda seeds: reset_envs(jax_env, seeds)),
        jax.jit(lambda carry: restart_envs(jax_env, carry)),
        jax.jit(lambda carry, actions: step_envs_in_bounds(jax_env, carry, actions)),
    )
