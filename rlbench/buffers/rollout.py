"""An on-policy rollout: `n_steps` vector steps of `n_envs` envs, kept on the JAX device (PPO, A2C).

Every field is [n_steps, n_envs, ...]; the PPO learner builds it from the transitions the loops staged
(rlbench.algos.ppo.learner), V and log pi read in one batched pass at the update. Beside SB3's RolloutBuffer fields
it keeps what GAE needs to treat a time limit as SB3 does, without folding it into the reward: `truncated` and
`final_value`, V(final obs) of a truncated episode, which rlbench.algos.ppo.gae adds to that step's reward as
gamma * final_value (SB3 adds it to the stored reward in OnPolicyAlgorithm.collect_rollouts). The rollout also keeps the
observation after its last step (`last_obs`); the update reads V(last_obs) with the parameters that collected the
rollout, which are those it starts from, as SB3's `compute_returns_and_advantage(last_values, dones)`.
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


def flatten_env_major(tree: T) -> T:
    """Every leaf [n_steps, n_envs, ...] -> [n_envs * n_steps, ...], env-major as SB3's `swap_and_flatten`, so sample i
    is env i // n_steps at step i % n_steps, and one permutation selects the same samples as SB3's."""
    flat: T = jax.tree.map(lambda x: jnp.swapaxes(x, 0, 1).reshape(-1, *x.shape[2:]), tree)
    return flat
