"""JAX-native counterparts of tests.envs' episode fixtures, for the device loop's episode semantics.

Registered on import (rlbench.envs.jax_native.ids.register_jax_env); use them as `tests.jax_envs:<id>`, which
imports this module."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np

from rlbench.envs.jax_native.env import JaxEnv
from rlbench.envs.jax_native.ids import register_jax_env
from rlbench.types import EnvSpec


def counting_env(
    env_id: str, max_episode_steps: int, terminate_at: int | None, blow_up_at: int | None = None
) -> JaxEnv:
    """Reward 1 each step and a constant observation 1.0; terminated at step `terminate_at` (None: never).
    With `blow_up_at`, the reward is 1e38 (finite in float32) from that step of an episode on: the critic's
    values overflow and the learner diverges while everything the env returns stays finite."""

    def reset(key):
        return jnp.zeros((), jnp.int32), jnp.ones(1, jnp.float32)

    def step(t, action, key):
        t = t + 1
        terminated = jnp.asarray(False) if terminate_at is None else t >= terminate_at
        reward = jnp.float32(1.0) if blow_up_at is None else jnp.where(t >= blow_up_at, 1e38, 1.0).astype(jnp.float32)
        return t, jnp.ones(1, jnp.float32), reward, terminated

    bounds = np.array([-2.0], np.float32), np.array([2.0], np.float32)
    return JaxEnv(env_id, EnvSpec(1, 1), *bounds, max_episode_steps, reset, step)


register_jax_env("tests.jax_envs:InfiniteHorizon-v0", lambda kwargs: counting_env("InfiniteHorizon", 8, None))
register_jax_env("tests.jax_envs:TerminateAt8-v0", lambda kwargs: counting_env("TerminateAt8", 1000, 8))
register_jax_env("tests.jax_envs:BlowUp-v0", lambda kwargs: counting_env("BlowUp", 5000, None, blow_up_at=300))
