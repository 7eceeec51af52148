"""An on-policy rollout: `n_steps` vector steps of `n_envs` envs, kept on the JAX device (PPO, A2C).

Every field is [n_steps, n_envs, ...], written one vector step at a time by the pure `add_step`, so a
device loop can fill it inside its scan and a host loop can fill it with one jitted call per step.
Beside SB3's RolloutBuffer fields it keeps what GAE needs to treat a time limit as SB3 does, without
folding it into the reward: `truncated` and `final_value`, V(final obs) of a truncated episode, which
rlbench.algos.ppo.gae adds to that step's reward as gamma * final_value (SB3 adds it to the stored
reward in OnPolicyAlgorithm.collect_rollouts). The rollout also keeps the observation after its last
step (`last_obs`); the update reads V(last_obs) with the parameters that collected the rollout, which
are those it starts from, as SB3's `compute_returns_and_advantage(last_values, dones)`.
"""

from __future__ import annotations

from typing import NamedTuple, TypeVar

import jax
import jax.numpy as jnp
from flax import struct

T = TypeVar("T")


class RolloutStep(NamedTuple):
    """One vector step of every env ([n_envs, ...]), or a whole rollout ([n_steps, n_envs, ...])."""

    obs: jax.Array  # [..., obs_dim] the observation the action was chosen from
    action: jax.Array  # [..., action_dim] float (Box, unclipped sample) or [...] int32 (Discrete)
    reward: jax.Array  # [...] the env's reward, without any bootstrap
    terminated: jax.Array  # [...] float 0/1: a true terminal state
    truncated: jax.Array  # [...] float 0/1: cut by a time limit (and not terminated)
    final_value: jax.Array  # [...] V(final obs) where truncated, else ignored (0 by convention)
    value: jax.Array  # [...] V(obs) when collected
    log_prob: jax.Array  # [...] log pi(action | obs) when collected


class RolloutState(struct.PyTreeNode):
    steps: RolloutStep  # [n_steps, n_envs, ...]
    last_obs: jax.Array  # [n_envs, obs_dim] the observation after the newest step (after reset if it ended)
    position: jax.Array  # int32, the next step to write; n_steps when the rollout is full


def init_rollout(
    n_steps: int, n_envs: int, obs_dim: int, action_shape: tuple[int, ...], action_dtype: jnp.dtype = jnp.float32
) -> RolloutState:
    """An empty rollout; `action_shape` is (action_dim,) for a Box, () for a Discrete space."""
    if n_steps < 1 or n_envs < 1:
        raise ValueError(f"a rollout needs n_steps >= 1 and n_envs >= 1, got {n_steps} and {n_envs}")
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

    Writing into a full rollout is an error the caller prevents (the loop trains once `is_full`): JAX
    clamps the index, so the last step would be overwritten rather than an error raised.
    """
    steps = jax.tree.map(lambda column, new: column.at[state.position].set(new.astype(column.dtype)), state.steps, step)
    return RolloutState(steps=steps, last_obs=next_obs.astype(jnp.float32), position=state.position + 1)


def is_full(state: RolloutState) -> jax.Array:
    return state.position == state.steps.reward.shape[0]


def restart(state: RolloutState) -> RolloutState:
    """The same storage, to be overwritten from step 0 (`last_obs` is kept: the next rollout starts there)."""
    return state.replace(position=jnp.zeros((), jnp.int32))


def flatten_env_major(tree: T) -> T:
    """Every leaf [n_steps, n_envs, ...] -> [n_envs * n_steps, ...], env-major as SB3's `swap_and_flatten`, so sample i
    is env i // n_steps at step i % n_steps, and one permutation selects the same samples as SB3's."""
    flat: T = jax.tree.map(lambda x: jnp.swapaxes(x, 0, 1).reshape(-1, *x.shape[2:]), tree)
    return flat
