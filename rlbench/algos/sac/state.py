"""SAC's training state: a pytree with named fields and no hidden Python state (so it can be vmapped)."""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
from flax import struct
from flax.training.train_state import TrainState

from rlbench.algos.common.layout import TransposedKernels, init_transposed
from rlbench.algos.common.steps import make_adam
from rlbench.algos.common.temperature import init_temperature
from rlbench.algos.sac.config import SACConfig
from rlbench.networks.actor import SquashedGaussianActor
from rlbench.networks.critic import CriticEnsemble
from rlbench.types import EnvSpec, Params


class CriticState(TrainState):
    """The critic ensemble and its Polyak-averaged copy used in the TD target."""

    target_params: Params


class SACState(struct.PyTreeNode):
    actor: TrainState
    critic: CriticState
    temperature: TrainState | None  # params {"log_alpha": scalar}; None when ent_coef is fixed
    key: jax.Array  # typed PRNG key for sampling batches, actions and dropout masks
    step: jax.Array  # int32 gradient steps done; a single run passes it as the update's first_step
    transposed: TransposedKernels | None = None  # W^T copies for plain-layout bfloat16 networks


class SACNetworks(NamedTuple):
    actor: SquashedGaussianActor
    critic: CriticEnsemble


def make_networks(cfg: SACConfig, spec: EnvSpec) -> SACNetworks:
    return SACNetworks(
        actor=SquashedGaussianActor(action_dim=spec.action_dim, config=cfg.actor),
        critic=CriticEnsemble(config=cfg.critic, n_critics=cfg.n_critics),
    )


def zero_step(state: TrainState) -> TrainState:
    """TrainState.step as an int32 array rather than a Python 0: lax.cond branches must agree on types."""
    return state.replace(step=jnp.zeros((), jnp.int32))


def init_variables(nets: SACNetworks, spec: EnvSpec, key: jax.Array) -> tuple[jax.Array, Params, Params]:
    """(remaining key, actor variables, critic variables), initialised on a dummy batch of one."""
    key, actor_key, critic_key = jax.random.split(key, 3)
    obs = jnp.zeros((1, spec.obs_dim), jnp.float32)
    action = jnp.zeros((1, spec.action_dim), jnp.float32)
    return key, nets.actor.init(actor_key, obs), nets.critic.init(critic_key, obs, action)


def critic_learning_rate(cfg: SACConfig):
    """qf_learning_rate when set, else the (scheduled) learning_rate."""
    return cfg.learning_rate if cfg.qf_learning_rate is None else cfg.qf_learning_rate


def init_state(cfg: SACConfig, spec: EnvSpec, nets: SACNetworks, key: jax.Array) -> SACState:
    key, actor_vars, critic_vars = init_variables(nets, spec, key)
    actor_params, critic_params = actor_vars["params"], critic_vars["params"]
    actor = TrainState.create(
        apply_fn=nets.actor.apply, params=actor_params, tx=make_adam(cfg.learning_rate, cfg.adam_b1)
    )
    critic = CriticState.create(
        apply_fn=nets.critic.apply,
        params=critic_params,
        # A separate copy: sharing buffers with `params` would break buffer donation.
        target_params=jax.tree.map(jnp.copy, critic_params),
        tx=make_adam(critic_learning_rate(cfg), cfg.adam_b1),
    )
    return SACState(
        actor=zero_step(actor),
        critic=zero_step(critic),
        # As SBX: the temperature's learning rate is the initial one, not scheduled.
        temperature=init_temperature(cfg.ent_coef.initial, cfg.ent_coef.learned, cfg.learning_rate.initial),
        key=key,
        step=jnp.zeros((), jnp.int32),
        transposed=init_transposed(cfg.actor, cfg.critic, actor_params, critic_params),
    )
