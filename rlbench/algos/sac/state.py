"""SAC's training state: a pytree with named fields and no hidden Python state (so it can be vmapped)."""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
from flax import struct
from flax.training.train_state import TrainState

from rlbench.algos.common.acting import Exploration, draw_exploration
from rlbench.algos.common.config import ActorCriticConfig
from rlbench.algos.common.steps import make_adam
from rlbench.algos.common.temperature import init_temperature
from rlbench.algos.common.train_state import NetworkState, TargetCriticState
from rlbench.algos.sac.config import SACConfig
from rlbench.networks.actor import SquashedGaussianActor
from rlbench.networks.critic import CriticEnsemble
from rlbench.types import EnvSpec, Params


class SACState(struct.PyTreeNode):
    actor: NetworkState
    critic: TargetCriticState
    temperature: TrainState | None  # params {"log_alpha": scalar}; None when ent_coef is fixed
    key: jax.Array  # typed PRNG key for sampling batches, actions and dropout masks
    step: jax.Array  # int32 gradient steps done; a single run passes it as the update's first_step
    exploration: Exploration | None = None  # gSDE's exploration matrices (None without gSDE)


class Networks(NamedTuple):
    actor: SquashedGaussianActor
    critic: CriticEnsemble


def make_networks(cfg: ActorCriticConfig, spec: EnvSpec, n_quantiles: int | None = None) -> Networks:
    """The actor and the critic ensemble; `n_quantiles` makes the critics distributional (TQC)."""
    return Networks(
        actor=SquashedGaussianActor(action_dim=spec.action_dim, config=cfg.actor, gsde=cfg.gsde),
        critic=CriticEnsemble(config=cfg.critic, n_critics=cfg.n_critics, n_quantiles=n_quantiles),
    )


def init_variables(nets: Networks, spec: EnvSpec, key: jax.Array) -> tuple[jax.Array, Params, Params]:
    """(remaining key, actor variables, critic variables), initialised on a dummy batch of one."""
    key, actor_key, critic_key = jax.random.split(key, 3)
    obs = jnp.zeros((1, spec.obs_dim), jnp.float32)
    action = jnp.zeros((1, spec.action_dim), jnp.float32)
    return key, nets.actor.init(actor_key, obs), nets.critic.init(critic_key, obs, action)


def init_exploration(
    cfg: ActorCriticConfig, actor: NetworkState, key: jax.Array
) -> tuple[jax.Array, Exploration | None]:
    """(remaining key, gSDE's first exploration matrices); without gSDE the key is left untouched, so
    that runs without it start exactly as before gSDE existed."""
    if cfg.gsde is None:
        return key, None
    key, exploration_key = jax.random.split(key)
    return key, draw_exploration(actor, exploration_key, cfg.gsde.n_envs)


def init_state(cfg: SACConfig, spec: EnvSpec, nets: Networks, key: jax.Array) -> SACState:
    """SAC's (and TQC's) initial state: fresh networks, the target critic a copy of the critic."""
    key, actor_vars, critic_vars = init_variables(nets, spec, key)
    critic_params = critic_vars["params"]
    actor = NetworkState.for_network(
        cfg.actor, nets.actor.apply, actor_vars["params"], make_adam(cfg.learning_rate, cfg.adam_b1, cfg.weight_decay)
    )
    key, exploration = init_exploration(cfg, actor, key)
    return SACState(
        actor=actor,
        critic=TargetCriticState.for_network(
            cfg.critic,
            nets.critic.apply,
            critic_params,
            make_adam(cfg.critic_learning_rate, cfg.adam_b1, cfg.weight_decay),
            # A separate copy: sharing buffers with `params` would break buffer donation.
            target_params=jax.tree.map(jnp.copy, critic_params),
        ),
        # As SBX: the temperature's learning rate is the initial one, not scheduled.
        temperature=init_temperature(cfg.ent_coef.initial, cfg.ent_coef.learned, cfg.learning_rate.initial),
        key=key,
        step=jnp.zeros((), jnp.int32),
        exploration=exploration,
    )
