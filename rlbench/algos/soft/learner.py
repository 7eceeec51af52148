"""The SAC family's learner with target critics (Haarnoja et al. 2018): SAC and DroQ with its critics,
TQC with quantile critics and their objective. Its state, networks and gradient steps, fused by fused.py.

Per gradient step (SB3/SBX order): critic step with the soft TD target from the Polyak-averaged target
critics and a fresh a' ~ pi(.|s'), Polyak update (every `target_update_interval` steps), then (every
`policy_delay` steps) the actor step and the temperature step. The state is a pytree with named fields and
no hidden Python state (so it can be vmapped). CrossQ (no target critics) shares its networks.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
from flax import struct
from flax.training.train_state import TrainState

from rlbench.algos.common.learner import Learner, assemble_learner
from rlbench.algos.common.losses import SOFT_Q, CriticObjective, actor_loss
from rlbench.algos.common.steps import apply_loss, make_adam
from rlbench.algos.common.targets import updated_target
from rlbench.algos.common.train_state import NetworkState, TargetCriticState
from rlbench.algos.soft.acting import Exploration, draw_exploration, soft_acting
from rlbench.algos.soft.config import SoftConfig, TargetCriticConfig, target_entropy
from rlbench.algos.soft.temperature import current_alpha, init_temperature, temperature_step
from rlbench.networks.actor import SquashedGaussianActor
from rlbench.networks.critic import CriticEnsemble
from rlbench.types import EnvSpec, Metrics, Params, Transition


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


def make_networks(cfg: SoftConfig, spec: EnvSpec, n_quantiles: int | None = None) -> Networks:
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


def init_exploration(cfg: SoftConfig, actor: NetworkState, key: jax.Array) -> tuple[jax.Array, Exploration | None]:
    """(remaining key, gSDE's first exploration matrices); without gSDE the key is left untouched, so
    that runs without it start exactly as before gSDE existed."""
    if cfg.gsde is None:
        return key, None
    key, exploration_key = jax.random.split(key)
    return key, draw_exploration(actor, exploration_key, cfg.gsde.n_envs)


def init_state(cfg: TargetCriticConfig, spec: EnvSpec, nets: Networks, key: jax.Array) -> SACState:
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


CRITIC_METRICS = ("train/critic_loss", "train/q_mean")
ACTOR_METRICS = ("train/actor_loss", "train/entropy", "train/ent_coef", "train/ent_coef_loss")


def critic_step(
    cfg: TargetCriticConfig, objective: CriticObjective, state: SACState, batch: Transition, key: jax.Array
) -> tuple[SACState, Metrics]:
    next_action_key, target_dropout_key, dropout_key = jax.random.split(key, 3)
    alpha = current_alpha(state.temperature, cfg.ent_coef.initial)
    next_action, next_log_prob = state.actor.apply_fn(state.actor.variables(), batch.next_obs).sample(next_action_key)
    # Dropout is on in every critic call of training: DroQ's target critic is a dropout network too.
    next_q = state.critic.apply_fn(
        state.critic.variables(state.critic.target_params),
        batch.next_obs,
        next_action,
        dropout=True,
        rngs={"dropout": target_dropout_key},
    )
    target = objective.target(next_q, next_log_prob, batch.reward, batch.terminated, alpha, cfg.gamma)

    def loss_fn(params: Params) -> tuple[jax.Array, jax.Array]:
        q = state.critic.apply_training(params, batch.obs, batch.action, dropout=True, rngs={"dropout": dropout_key})
        return objective.loss(q, target), q

    critic, loss, q = apply_loss(state.critic, loss_fn)
    critic = critic.replace(target_params=updated_target(cfg, state.step, critic.target_params, critic.params))
    return state.replace(critic=critic), {"train/critic_loss": loss, "train/q_mean": q.mean()}


def actor_step(
    cfg: SoftConfig,
    objective: CriticObjective,
    entropy_target: float,
    state: SACState,
    batch: Transition,
    key: jax.Array,
) -> tuple[SACState, Metrics]:
    action_key, dropout_key = jax.random.split(key)
    alpha = current_alpha(state.temperature, cfg.ent_coef.initial)

    def loss_fn(actor_params: Params) -> tuple[jax.Array, jax.Array]:
        action, log_prob = state.actor.apply_training(actor_params, batch.obs).sample(action_key)
        q = state.critic.apply_fn(
            state.critic.variables(), batch.obs, action, dropout=True, rngs={"dropout": dropout_key}
        )
        return actor_loss(log_prob, objective.value(q), alpha), log_prob

    actor, loss, log_prob = apply_loss(state.actor, loss_fn)
    entropy = -log_prob  # [B], per-sample estimate of H(pi(.|s))
    temperature, temperature_loss = temperature_step(state.temperature, entropy, entropy_target, cfg.temperature_loss)
    metrics = {
        "train/actor_loss": loss,
        "train/entropy": entropy.mean(),
        "train/ent_coef": alpha,
        "train/ent_coef_loss": temperature_loss,
    }
    return state.replace(actor=actor, temperature=temperature), metrics


def make_soft_learner(
    cfg: TargetCriticConfig, spec: EnvSpec, objective: CriticObjective = SOFT_Q, n_quantiles: int | None = None
) -> Learner[SACState]:
    """Bind the pure functions to a config (SACConfig, TQCConfig: a SoftConfig with tau and
    target_update_interval) and an environment spec; TQC: to its quantile critics and objective."""
    nets = make_networks(cfg, spec, n_quantiles)
    entropy_target = target_entropy(cfg, spec)
    return assemble_learner(
        cfg,
        spec,
        soft_acting(cfg.gsde),
        init_fn=lambda key: init_state(cfg, spec, nets, key),
        critic_step=lambda state, batch, key: critic_step(cfg, objective, state, batch, key),
        actor_step=lambda state, batch, key: actor_step(cfg, objective, entropy_target, state, batch, key),
        critic_metric_names=CRITIC_METRICS,
        actor_metric_names=ACTOR_METRICS,
    )
