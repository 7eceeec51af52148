"""CrossQ's training state: like SAC's, with BatchRenorm statistics and no target critic."""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import struct
from flax.training.train_state import TrainState

from rlbench.algos.common.steps import make_adam
from rlbench.algos.common.train_state import NormalizedState
from rlbench.algos.crossq.config import CrossQConfig
from rlbench.algos.soft.acting import Exploration
from rlbench.algos.soft.learner import Networks, init_exploration, init_variables
from rlbench.algos.soft.temperature import init_temperature
from rlbench.types import EnvSpec


class CrossQState(struct.PyTreeNode):
    actor: NormalizedState
    critic: NormalizedState  # no target parameters: CrossQ bootstraps from the online critic
    temperature: TrainState | None
    key: jax.Array
    step: jax.Array  # int32 gradient steps done
    exploration: Exploration | None = None  # gSDE's exploration matrices (None without gSDE)


def init_state(cfg: CrossQConfig, spec: EnvSpec, nets: Networks, key: jax.Array) -> CrossQState:
    """The same networks as SAC (BatchRenorm is switched on by their configs), without a target copy."""
    key, actor_vars, critic_vars = init_variables(nets, spec, key)
    actor = NormalizedState.for_network(
        cfg.actor,
        nets.actor.apply,
        actor_vars["params"],
        make_adam(cfg.learning_rate, cfg.adam_b1, cfg.weight_decay),
        batch_stats=actor_vars.get("batch_stats", {}),
    )
    key, exploration = init_exploration(cfg, actor, key)
    return CrossQState(
        actor=actor,
        critic=NormalizedState.for_network(
            cfg.critic,
            nets.critic.apply,
            critic_vars["params"],
            make_adam(cfg.critic_learning_rate, cfg.adam_b1, cfg.weight_decay),
            batch_stats=critic_vars.get("batch_stats", {}),
        ),
        temperature=init_temperature(cfg.ent_coef.initial, cfg.ent_coef.learned, cfg.learning_rate.initial),
        key=key,
        step=jnp.zeros((), jnp.int32),
        exploration=exploration,
    )
