"""Acting with any learner's state: its actor (a NetworkState) in evaluation mode, nothing else.

So a policy loaded from a checkpoint acts without a replay buffer or an optimizer step, and every
algorithm acts the same way: a tanh-squashed Gaussian sample for collection, its mode for evaluation.
"""

from __future__ import annotations

from typing import Any

import jax

from rlbench.networks.actor import deterministic_action, sample_action


def act(state: Any, obs: jax.Array, key: jax.Array) -> tuple[jax.Array, jax.Array]:
    """(a ~ pi(.|obs) in [-1, 1], the next key), for collecting experience."""
    key, action_key = jax.random.split(key)
    mean, log_std = state.actor.apply_fn(state.actor.variables(), obs)
    return sample_action(mean, log_std, action_key)[0], key


def act_deterministic(state: Any, obs: jax.Array) -> jax.Array:
    """tanh of the Gaussian mean, for evaluation."""
    return deterministic_action(state.actor.apply_fn(state.actor.variables(), obs)[0])
