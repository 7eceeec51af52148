"""PPO's learner state (one train state for the policy and value networks: SB3 trains both with one
optimizer on the summed loss) and how it acts: a sample with its value and log-probability for the
rollout, or the distribution's mode for evaluation."""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
from flax import struct
from flax.training.train_state import TrainState

from rlbench.algos.ppo.config import PPOConfig, make_optimizer
from rlbench.networks.actor_critic import ActorCritic


class PPOState(struct.PyTreeNode):
    policy: TrainState  # ActorCritic's parameters and the optimizer (gradient clipping, Adam or RMSprop)
    key: jax.Array
    step: jax.Array  # int32 gradient steps taken (steps skipped by target_kl not counted)
    n_updates: jax.Array  # int32 SB3's train/n_updates: epochs started
    exploration: Any = None  # every learner state's acting state (rlbench.algos.common.acting): none for PPO yet


class Exploration(NamedTuple):
    """What acting returns for the rollout: the action as sampled (unclipped), V(obs), log pi(action|obs)."""

    action: jax.Array
    value: jax.Array
    log_prob: jax.Array


def init_state(cfg: PPOConfig, network: ActorCritic, obs_dim: int, key: jax.Array) -> PPOState:
    init_key, key = jax.random.split(key)
    params = network.init(init_key, jnp.zeros((1, obs_dim), jnp.float32))["params"]
    policy = TrainState.create(apply_fn=network.apply, params=params, tx=make_optimizer(cfg))
    zero = jnp.zeros((), jnp.int32)
    # An int32 counter, not TrainState's Python 0: a weakly typed leaf would change type after the
    # first update and make the next call trace again.
    return PPOState(policy=policy.replace(step=zero), key=key, step=zero, n_updates=zero)


def explore(state: PPOState, obs: jax.Array, key: jax.Array) -> Exploration:
    """A sampled action per row of obs [B, obs_dim], as stored in the rollout."""
    distribution, value = state.policy.apply_fn({"params": state.policy.params}, obs)
    action = distribution.sample(key)
    return Exploration(action=action, value=value, log_prob=distribution.log_prob(action))


def value_of(state: PPOState, obs: jax.Array) -> jax.Array:
    """V(obs) [B]: the bootstrap of a truncated episode's final observation (RolloutStep.final_value)."""
    return state.policy.apply_fn({"params": state.policy.params}, obs)[1]


def deterministic_action(state: PPOState, obs: jax.Array) -> jax.Array:
    distribution, _ = state.policy.apply_fn({"params": state.policy.params}, obs)
    return distribution.mode()
