"""Generalized advantage estimation (Schulman et al. 2016, https://arxiv.org/abs/1506.02438) as a reverse
`lax.scan`, with SB3's treatment of episode ends (RolloutBuffer.compute_returns_and_advantage).

For step t of each env, with d_t = 1 if the episode ended at t (terminated or truncated):
    r'_t    = r_t + gamma * V(final obs_t)   if truncated (and not terminated), else r_t
    delta_t = r'_t + gamma * V_{t+1} * (1 - d_t) - V_t
    A_t     = delta_t + gamma * lambda * (1 - d_t) * A_{t+1}
    R_t     = A_t + V_t   (the value target, TD(lambda))
V_{t+1} is the next step's stored value, and V(last obs) after the rollout's last step. A truncated
episode's future is thus carried by its own final observation, not by the next episode's first one.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from rlbench.buffers.rollout import RolloutStep


class Advantages(NamedTuple):
    advantages: jax.Array  # [n_steps, n_envs]
    returns: jax.Array  # [n_steps, n_envs]


def bootstrapped_rewards(steps: RolloutStep, gamma: float) -> jax.Array:
    """r + gamma * V(final obs) on truncated steps: the one place a time limit's bootstrap is added (SB3
    adds the same term to the reward while collecting, in OnPolicyAlgorithm.collect_rollouts)."""
    truncated_only = steps.truncated * (1.0 - steps.terminated)
    return steps.reward + gamma * truncated_only * steps.final_value


def generalized_advantages(steps: RolloutStep, last_value: jax.Array, gamma: float, gae_lambda: float) -> Advantages:
    """A_t and R_t of a rollout [n_steps, n_envs], given V(last obs) [n_envs]."""
    rewards = bootstrapped_rewards(steps, gamma)
    not_ended = 1.0 - jnp.maximum(steps.terminated, steps.truncated)
    next_values = jnp.concatenate([steps.value[1:], last_value[None]], axis=0)  # [n_steps, n_envs]
    deltas = rewards + gamma * next_values * not_ended - steps.value

    def backward(next_advantage: jax.Array, step: tuple[jax.Array, jax.Array]) -> tuple[jax.Array, jax.Array]:
        delta, continues = step
        advantage = delta + gamma * gae_lambda * continues * next_advantage
        return advantage, advantage

    _, advantages = jax.lax.scan(backward, jnp.zeros_like(last_value), (deltas, not_ended), reverse=True)
    return Advantages(advantages=advantages, returns=advantages + steps.value)
