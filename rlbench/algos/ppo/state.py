"""PPO's learner state (one train state for the policy and value networks: SB3 trains both with one
optimizer on the summed loss) and its exploration state: gSDE's matrices, one per env, when use_sde."""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import struct
from flax.training.train_state import TrainState

from rlbench.algos.ppo.config import PPOConfig, make_optimizer
from rlbench.algos.soft.acting import Exploration
from rlbench.networks.actor_critic import ActorCritic
from rlbench.types import EnvSpec, Params


class PPOState(struct.PyTreeNode):
    policy: TrainState  # ActorCritic's parameters and the optimizer (gradient clipping, Adam or RMSprop)
    key: jax.Array
    step: jax.Array  # int32 gradient steps taken (steps skipped by target_kl not counted)
    n_updates: jax.Array  # int32 SB3's train/n_updates: epochs started
    exploration: Exploration | None = None  # gSDE's held matrices [n_envs, latent, action] (None without)


def init_state(cfg: PPOConfig, network: ActorCritic, spec: EnvSpec, key: jax.Array) -> PPOState:
    init_key, key = jax.random.split(key)
    params = network.init(init_key, jnp.zeros((1, spec.obs_dim), spec.obs_dtype))["params"]
    # flax leaves TrainState.create unannotated; it returns a TrainState.
    policy: TrainState = TrainState.create(apply_fn=network.apply, params=params, tx=make_optimizer(cfg))
    zero = jnp.zeros((), jnp.int32)
    exploration = None
    if cfg.use_sde:  # the key is split only then: without gSDE the key stream is the one it always was
        key, exploration_key = jax.random.split(key)
        exploration = draw_matrices(params, exploration_key, cfg.rollout_envs)
    # An int32 counter, not TrainState's Python 0: a weakly typed leaf would change type after the
    # first update and make the next call trace again.
    return PPOState(policy=policy.replace(step=zero), key=key, step=zero, n_updates=zero, exploration=exploration)


def draw_matrices(params: Params, key: jax.Array, n_envs: int) -> Exploration:
    """gSDE's matrices W ~ N(0, exp(log_std)^2), one per env, and the key of the next draw."""
    key, draw = jax.random.split(key)
    std = jnp.exp(params["log_std"])
    return Exploration(std * jax.random.normal(draw, (n_envs, *std.shape), std.dtype), key)


def resample_exploration(state: PPOState) -> PPOState:
    """New matrices from the std as it is now (SB3's reset_noise: every rollout's start, every sde_sample_freq)."""
    exploration = state.exploration
    assert exploration is not None, "gSDE's matrices are resampled only with use_sde (ppo_acting)"
    matrices = draw_matrices(state.policy.params, exploration.key, exploration.matrices.shape[0])
    return state.replace(exploration=matrices)
