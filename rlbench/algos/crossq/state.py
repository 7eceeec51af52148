"""CrossQ's training state: like SAC's, with BatchRenorm statistics and no target critic."""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
from flax import struct
from flax.training.train_state import TrainState

from rlbench.algos.common.steps import make_adam
from rlbench.algos.common.temperature import init_temperature
from rlbench.algos.sac.config import SACConfig
from rlbench.algos.sac.state import zero_step
from rlbench.networks.actor import SquashedGaussianActor
from rlbench.networks.critic import CriticEnsemble
from rlbench.types import EnvSpec, Params


class NormalizedState(TrainState):
    """Parameters, optimizer state and the BatchRenorm statistics (running mean, var, step counter)."""

    batch_stats: Params


class CrossQState(struct.PyTreeNode):
    actor: NormalizedState
    critic: NormalizedState  # no target parameters: CrossQ bootstraps from the online critic
    temperature: TrainState | None
    key: jax.Array
    step: jax.Array  # int32 gradient steps done


class CrossQNetworks(NamedTuple):
    actor: SquashedGaussianActor
    critic: CriticEnsemble


def make_networks(cfg: SACConfig, spec: EnvSpec) -> CrossQNetworks:
    return CrossQNetworks(
        actor=SquashedGaussianActor(action_dim=spec.action_dim, config=cfg.actor),
        critic=CriticEnsemble(config=cfg.critic, n_critics=cfg.n_critics),
    )


def init_state(cfg: SACConfig, spec: EnvSpec, nets: CrossQNetworks, key: jax.Array) -> CrossQState:
    key, actor_key, critic_key = jax.random.split(key, 3)
    obs = jnp.zeros((1, spec.obs_dim), jnp.float32)
    action = jnp.zeros((1, spec.action_dim), jnp.float32)
    actor_vars = nets.actor.init(actor_key, obs)
    critic_vars = nets.critic.init(critic_key, obs, action)
    critic_lr = cfg.learning_rate if cfg.qf_learning_rate is None else cfg.qf_learning_rate
    actor = NormalizedState.create(apply_fn=nets.actor.apply, params=actor_vars["params"],
                                   batch_stats=actor_vars.get("batch_stats", {}),
                                   tx=make_adam(cfg.learning_rate, cfg.adam_b1))
    critic = NormalizedState.create(apply_fn=nets.critic.apply, params=critic_vars["params"],
                                    batch_stats=critic_vars.get("batch_stats", {}),
                                    tx=make_adam(critic_lr, cfg.adam_b1))
    return CrossQState(
        actor=zero_step(actor),
        critic=zero_step(critic),
        temperature=init_temperature(cfg.ent_coef.initial, cfg.ent_coef.learned, cfg.learning_rate.initial),
        key=key,
        step=jnp.zeros((), jnp.int32),
    )
