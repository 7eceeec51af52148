"""PPO rollouts built step by step in the tests, as SB3's collect_rollouts fills its RolloutBuffer: the learner
builds its RolloutState from the staged transitions instead (rlbench.algos.ppo.learner), and the tests check
it against rollouts made here."""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from rlbench.algos.ppo.state import PPOState
from rlbench.buffers.rollout import RolloutState, RolloutStep


class RolloutSample(NamedTuple):
    """An action as a rollout stores it (the sample, unclipped) with V(obs) and log pi(action | obs)."""

    action: jax.Array
    value: jax.Array
    log_prob: jax.Array


def sample_for_rollout(state: PPOState, obs: jax.Array, key: jax.Array) -> RolloutSample:
    """A sampled action per row of obs [B, obs_dim] with its value and log-probability (fresh noise)."""
    distribution, value = state.policy.apply_fn({"params": state.policy.params}, obs)
    action = distribution.sample(key)
    return RolloutSample(action=action, value=value, log_prob=distribution.log_prob(action))


def init_rollout(
    n_steps: int, n_envs: int, obs_dim: int, action_shape: tuple[int, ...], action_dtype: jnp.dtype = jnp.float32
) -> RolloutState:
    """An empty rollout; `action_shape` is (action_dim,) for a Box, () for a Discrete space."""
    per_env = jnp.zeros((n_steps, n_envs), jnp.float32)
    steps = RolloutStep(
        obs=jnp.zeros((n_steps, n_envs, obs_dim), jnp.float32),
        action=jnp.zeros((n_steps, n_envs, *action_shape), action_dtype),
        reward=per_env,
        terminated=per_env,
        truncated=per_env,
        final_value=per_env,
        value=per_env,
        log_prob=per_env,
    )
    return RolloutState(
        steps=steps, last_obs=jnp.zeros((n_envs, obs_dim), jnp.float32), position=jnp.zeros((), jnp.int32)
    )


def add_step(state: RolloutState, step: RolloutStep, next_obs: jax.Array) -> RolloutState:
    """The rollout with `step` ([n_envs, ...]) written at its position and `next_obs` as its last obs.

    Writing into a full rollout is the caller's error: JAX clamps the index, so the last step is overwritten.
    """
    steps = jax.tree.map(lambda column, new: column.at[state.position].set(new.astype(column.dtype)), state.steps, step)
    return RolloutState(steps=steps, last_obs=next_obs.astype(jnp.float32), position=state.position + 1)


def is_full(state: RolloutState) -> jax.Array:
    return state.position == state.steps.reward.shape[0]
