"""DQN's training state: the Q-network with its target copy, the exploration state (the vector steps acted,
which the epsilon-greedy warm-up and the target updates count) and the target updates done."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import optax
from flax import struct

from rlbench.algos.common.train_state import TargetCriticState
from rlbench.algos.dqn.config import DQNConfig
from rlbench.networks.action_values import ActionValues
from rlbench.types import EnvSpec


class DQNState(struct.PyTreeNode):
    q: TargetCriticState
    key: jax.Array  # typed PRNG key for sampling batches
    step: jax.Array  # int32 gradient steps done
    exploration: jax.Array  # int32 vector steps acted so far (SB3's _n_calls): the warm-up and the target's clock
    target_updates: jax.Array  # int32 target updates done: exploration // the interval once up to date


def make_optimizer(cfg: DQNConfig) -> optax.GradientTransformation:
    """Adam after clipping the gradient's global norm to max_grad_norm (when set), with the learning rate a leaf of
    the state (`inject_hyperparams`) so a schedule needs no recompile."""

    def chain(learning_rate: float) -> optax.GradientTransformation:
        adam = optax.adam(learning_rate)
        return adam if cfg.max_grad_norm is None else optax.chain(optax.clip_by_global_norm(cfg.max_grad_norm), adam)

    return optax.inject_hyperparams(chain)(learning_rate=cfg.learning_rate.initial)


def init_state(cfg: DQNConfig, spec: EnvSpec, network: ActionValues, key: jax.Array) -> DQNState:
    """A fresh Q-network, its target a copy (a separate one: shared buffers break donation)."""
    key, q_key = jax.random.split(key)
    params = network.init(q_key, jnp.zeros((1, spec.obs_dim), spec.obs_dtype))["params"]
    q = TargetCriticState.for_network(
        cfg.q_network, network.apply, params, make_optimizer(cfg), target_params=jax.tree.map(jnp.copy, params)
    )
    zero = jnp.zeros((), jnp.int32)
    return DQNState(q=q, key=key, step=zero, exploration=zero, target_updates=zero)
