"""Brax's and MuJoCo Playground's env protocol as a JaxEnv: `env.reset(rng) -> State` and
`env.step(State, action) -> State`, the State holding `obs` (an array, or a dict whose "state" entry is
what the policy sees, as their trainers' default), `reward` and `done` (float 0/1).

Neither package's env applies a time limit itself (their trainers wrap it: an EpisodeWrapper), so `done` is
termination alone, and the time limit is rlbench's vector layer's. Their envs keep any randomness they need
in the State (`info["rng"]`), so the step's key is not used. Keys reach them as raw uint32[2] key data, the
form both were written for.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

import jax
import jax.numpy as jnp
import numpy as np

from rlbench.envs.jax_native.env import JaxEnv, Render, conformed, traced_reset
from rlbench.envs.jax_native.packages import kwargs_error
from rlbench.types import EnvSpec, PyTree


class StateProtocolEnv(Protocol):
    """What is used of a Brax or Playground env: its State holds `obs`, `reward` and `done`."""

    @property
    def action_size(self) -> int: ...

    def reset(self, rng: jax.Array) -> PyTree: ...

    def step(self, state: PyTree, action: jax.Array) -> PyTree: ...


def policy_obs(obs: jax.Array | Mapping[str, jax.Array]) -> jax.Array:
    """The observation the policy acts on, flat float32."""
    if isinstance(obs, Mapping):
        obs = obs["state"]
    return jnp.ravel(obs).astype(jnp.float32)


def state_protocol_env(
    env_id: str,
    env: StateProtocolEnv,
    max_episode_steps: int,
    env_kwargs: Mapping[str, Any],
    render: Render | None = None,
) -> JaxEnv:
    """`env` (Brax's or Playground's) as a JaxEnv with actions in [-1, 1] (both packages' trainers act there)."""

    def reset_raw(key: jax.Array) -> tuple[PyTree, jax.Array]:
        state = env.reset(jax.random.key_data(key))
        return state, policy_obs(state.obs)

    reset, shapes, obs_shape = traced_reset(reset_raw, lambda error: kwargs_error(env_id, env_kwargs, error))

    def step(state: PyTree, action: jax.Array, key: jax.Array) -> tuple[PyTree, jax.Array, jax.Array, jax.Array]:
        state = conformed(env.step(state, action), shapes)
        return state, policy_obs(state.obs), jnp.asarray(state.reward, jnp.float32), jnp.asarray(state.done) > 0

    action_dim = int(env.action_size)
    try:
        jax.eval_shape(step, shapes, jax.ShapeDtypeStruct((action_dim,), jnp.float32), jax.random.key(0))
    except Exception as error:
        raise kwargs_error(env_id, env_kwargs, error) from None
    ones = np.ones(action_dim, np.float32)
    return JaxEnv(
        env_id=env_id,
        spec=EnvSpec(obs_dim=int(obs_shape.shape[0]), action_dim=action_dim),
        action_low=-ones,
        action_high=ones,
        max_episode_steps=max_episode_steps,
        reset=reset,
        step=step,
        render=render,
    )
