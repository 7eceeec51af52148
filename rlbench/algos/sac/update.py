"""SAC's gradient step (Haarnoja et al. 2018), fused by algos/common/fused.py.

Per gradient step (SB3/SBX order): critic step with the soft TD target from the Polyak-averaged
target critics and a fresh a' ~ pi(.|s'), Polyak update (every `target_update_interval` steps), then
(every `policy_delay` steps) the actor step and the temperature step. DroQ is this module with dropout
+ layer norm in the critic; TQC is this module with quantile critics and their objective
(rlbench/algos/tqc).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from rlbench.algos.common.config import ActorCriticConfig
from rlbench.algos.common.learner import Learner, assemble_learner
from rlbench.algos.common.losses import SOFT_Q, CriticObjective, actor_loss
from rlbench.algos.common.steps import apply_loss, polyak
from rlbench.algos.common.temperature import current_alpha, temperature_step
from rlbench.algos.sac.config import SACConfig
from rlbench.algos.sac.state import SACState, init_state, make_networks
from rlbench.types import EnvSpec, Metrics, Params, Transition

CRITIC_METRICS = ("train/critic_loss", "train/q_mean")
ACTOR_METRICS = ("train/actor_loss", "train/entropy", "train/ent_coef", "train/ent_coef_loss")


def target_entropy(cfg: ActorCriticConfig, spec: EnvSpec) -> float:
    """-dim(A) unless set."""
    return -float(spec.action_dim) if cfg.target_entropy is None else cfg.target_entropy


def critic_step(
    cfg: SACConfig, objective: CriticObjective, state: SACState, batch: Transition, key: jax.Array
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

    def loss_fn(params):
        q = state.critic.apply_training(params, batch.obs, batch.action, dropout=True, rngs={"dropout": dropout_key})
        return objective.loss(q, target), q

    critic, loss, q = apply_loss(state.critic, loss_fn)
    critic = critic.replace(target_params=updated_target(cfg, state.step, critic.target_params, critic.params))
    return state.replace(critic=critic), {"train/critic_loss": loss, "train/q_mean": q.mean()}


def updated_target(cfg: SACConfig, step: jax.Array, target_params: Params, params: Params) -> Params:
    """The target critics after gradient step `step` (counted from 0): Polyak-averaged towards `params` on
    steps 0, target_update_interval, 2 * target_update_interval, ..., unchanged on the others.

    `step` is the learner state's own counter. Under the seed axis's vmap it is batched, so the choice is a
    `where` on the averaged parameters rather than a `lax.cond` (which would become a select of both
    branches anyway): the average is one cheap elementwise pass. SB3 counts from 0 in each training call
    instead, so that with one gradient step per call its setting has no effect; here it counts every step.
    """
    averaged = polyak(target_params, params, cfg.tau)
    if cfg.target_update_interval == 1:  # static: every step, no select
        return averaged
    due = step % cfg.target_update_interval == 0
    return jax.tree.map(lambda new, old: jnp.where(due, new, old), averaged, target_params)


def actor_step(
    cfg: ActorCriticConfig,
    objective: CriticObjective,
    entropy_target: float,
    state: SACState,
    batch: Transition,
    key: jax.Array,
) -> tuple[SACState, Metrics]:
    action_key, dropout_key = jax.random.split(key)
    alpha = current_alpha(state.temperature, cfg.ent_coef.initial)

    def loss_fn(actor_params):
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


def make_learner(
    cfg: SACConfig, spec: EnvSpec, objective: CriticObjective = SOFT_Q, n_quantiles: int | None = None
) -> Learner[SACState]:
    """Bind SAC's pure functions to a config and an environment spec (TQC: to its quantile critics)."""
    nets = make_networks(cfg, spec, n_quantiles)
    entropy_target = target_entropy(cfg, spec)
    return assemble_learner(
        cfg,
        init_fn=lambda key: init_state(cfg, spec, nets, key),
        critic_step=lambda state, batch, key: critic_step(cfg, objective, state, batch, key),
        actor_step=lambda state, batch, key: actor_step(cfg, objective, entropy_target, state, batch, key),
        critic_metric_names=CRITIC_METRICS,
        actor_metric_names=ACTOR_METRICS,
    )
