"""CrossQ's gradient step, fused by algos/common/fused.py (shared with SAC).

Critic step: no target network. One training-mode pass of the critic ensemble over the joint batch
[(s, a); (s', a')], a' ~ pi(.|s') from the actor in evaluation mode; the output is split into Q(s, a)
and Q(s', a'), the soft TD target is built from the second half under stop_gradient, and the batch
statistics of that one pass are kept. Actor step: the actor in training mode (its BatchRenorm
statistics updated), the critic in evaluation mode. Temperature: as SAC.

CrossQ + TQC (`n_quantiles` set): the same joint pass through quantile critics, TQC's truncated
quantile target and quantile Huber loss, and the actor on the mean of all quantiles.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from rlbench.algos.common.learner import Learner, assemble_learner
from rlbench.algos.common.losses import SOFT_Q, CriticObjective, actor_loss
from rlbench.algos.common.quantiles import quantile_objective
from rlbench.algos.common.steps import apply_loss
from rlbench.algos.crossq.config import CrossQConfig
from rlbench.algos.crossq.state import CrossQState, init_state
from rlbench.algos.soft.acting import soft_acting
from rlbench.algos.soft.config import target_entropy
from rlbench.algos.soft.learner import make_networks
from rlbench.algos.soft.temperature import current_alpha, temperature_step
from rlbench.types import EnvSpec, Metrics, Params, Transition

CRITIC_METRICS = ("train/critic_loss", "train/q_mean", "train/critic_bn_steps")
ACTOR_METRICS = ("train/actor_loss", "train/entropy", "train/ent_coef", "train/ent_coef_loss", "train/actor_bn_steps")


def bn_steps(batch_stats: Params) -> jax.Array:
    """Training-mode calls counted by the first BatchRenorm layer (0 without BatchRenorm), as float32
    like every other metric."""
    counters = [
        leaf
        for path, leaf in jax.tree_util.tree_leaves_with_path(batch_stats)
        if getattr(path[-1], "key", None) == "steps"
    ]
    return jnp.max(counters[0]).astype(jnp.float32) if counters else jnp.zeros((), jnp.float32)


def critic_step(
    cfg: CrossQConfig, objective: CriticObjective, state: CrossQState, batch: Transition, key: jax.Array
) -> tuple[CrossQState, Metrics]:
    next_action_key, dropout_key = jax.random.split(key)
    alpha = current_alpha(state.temperature, cfg.ent_coef.initial)
    policy = state.actor.apply_fn(state.actor.variables(), batch.next_obs, train=False)
    next_action, next_log_prob = policy.sample(next_action_key)
    batch_size = batch.reward.shape[0]

    def loss_fn(params: Params) -> tuple[jax.Array, tuple[jax.Array, Params]]:
        # CrossQ's key idea: ONE training-mode pass over the concatenation of (s, a) and (s', a').
        # BatchRenorm then normalises both halves with the statistics of their mixture. Two separate
        # passes would either normalise (s', a') with statistics of (s, a), for which the policy's
        # next actions are out of distribution, or normalise each half with its own statistics so
        # that Q(s, a) and Q(s', a') are on different scales; both break the bootstrap. One pass
        # is also cheaper. The running statistics kept are those of this joint batch.
        joint_obs = jnp.concatenate([batch.obs, batch.next_obs])  # [2B, obs_dim]
        joint_action = jnp.concatenate([batch.action, next_action])  # [2B, action_dim]
        joint_q, updates = state.critic.apply_training(
            params,
            joint_obs,
            joint_action,
            train=True,
            dropout=True,
            rngs={"dropout": dropout_key},
            mutable=["batch_stats"],
        )
        q, next_q = joint_q[:, :batch_size], joint_q[:, batch_size:]  # [n_critics, B(, n_quantiles)] each
        target = objective.target(next_q, next_log_prob, batch.reward, batch.terminated, alpha, cfg.gamma)
        return objective.loss(q, target), (q, updates["batch_stats"])

    critic, loss, (q, batch_stats) = apply_loss(state.critic, loss_fn)
    critic = critic.replace(batch_stats=batch_stats)
    metrics = {"train/critic_loss": loss, "train/q_mean": q.mean(), "train/critic_bn_steps": bn_steps(batch_stats)}
    return state.replace(critic=critic), metrics


def actor_step(
    cfg: CrossQConfig,
    objective: CriticObjective,
    entropy_target: float,
    state: CrossQState,
    batch: Transition,
    key: jax.Array,
) -> tuple[CrossQState, Metrics]:
    action_key, dropout_key = jax.random.split(key)
    alpha = current_alpha(state.temperature, cfg.ent_coef.initial)

    def loss_fn(actor_params: Params) -> tuple[jax.Array, tuple[jax.Array, Params]]:
        policy, updates = state.actor.apply_training(actor_params, batch.obs, train=True, mutable=["batch_stats"])
        action, log_prob = policy.sample(action_key)
        # The critic in evaluation mode: running statistics, no statistics update from the actor's
        # actions. Dropout stays on, as in the critic step (CrossQ + DroQ configuration).
        q = state.critic.apply_fn(
            state.critic.variables(), batch.obs, action, train=False, dropout=True, rngs={"dropout": dropout_key}
        )
        return actor_loss(log_prob, objective.value(q), alpha), (log_prob, updates["batch_stats"])

    actor, loss, (log_prob, batch_stats) = apply_loss(state.actor, loss_fn)
    actor = actor.replace(batch_stats=batch_stats)
    entropy = -log_prob
    temperature, temperature_loss = temperature_step(state.temperature, entropy, entropy_target, cfg.temperature_loss)
    metrics = {
        "train/actor_loss": loss,
        "train/entropy": entropy.mean(),
        "train/ent_coef": alpha,
        "train/ent_coef_loss": temperature_loss,
        "train/actor_bn_steps": bn_steps(batch_stats),
    }
    return state.replace(actor=actor, temperature=temperature), metrics


def make_learner(cfg: CrossQConfig, spec: EnvSpec) -> Learner[CrossQState]:
    """Bind CrossQ's pure functions to a config and an environment spec."""
    if cfg.quantiles is None:
        objective, nets = SOFT_Q, make_networks(cfg, spec)
    else:  # CrossQ + TQC
        objective, nets = quantile_objective(cfg.quantiles), make_networks(cfg, spec, cfg.quantiles.n_quantiles)
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
