"""CrossQ's training state: like SAC's, with BatchRenorm statistics and no target critic."""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import struct
from flax.training.train_state import TrainState

from rlbench.algos.common.layout import TransposedKernels, init_transposed
from rlbench.algos.common.steps import make_adam
from rlbench.algos.common.temperature import init_temperature
from rlbench.algos.sac.config import SACConfig
from rlbench.algos.sac.state import SACNetworks, critic_learning_rate, init_variables, zero_step
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
    transposed: TransposedKernels | None = None  # W^T copies for plain-layout bfloat16 networks


def init_state(cfg: SACConfig, spec: EnvSpec, nets: SACNetworks, key: jax.Array) -> CrossQState:
    """The same networks as SAC (BatchRenorm is switched on by their configs), without a target copy."""
    key, actor_vars, critic_vars = init_variables(nets, spec, key)
    actor = NormalizedState.create(
        apply_fn=nets.actor.apply,
        params=actor_vars["params"],
        batch_stats=actor_vars.get("batch_stats", {}),
        tx=make_adam(cfg.learning_rate, cfg.adam_b1),
    )
    critic = NormalizedState.create(
        apply_fn=nets.critic.apply,
        params=critic_vars["params"],
        batch_stats=critic_vars.get("batch_stats", {}),
        tx=make_adam(critic_learning_rate(cfg), cfg.adam_b1),
    )
    return CrossQState(
        actor=zero_step(actor),
        critic=zero_step(critic),
        temperature=init_temperature(cfg.ent_coef.initial, cfg.ent_coef.learned, cfg.learning_rate.initial),
        key=key,
        step=jnp.zeros((), jnp.int32),
        transposed=init_transposed(cfg.actor, cfg.critic, actor_vars["params"], critic_vars["params"]),
    )
