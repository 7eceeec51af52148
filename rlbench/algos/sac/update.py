"""SAC's gradient step (Haarnoja et al. 2018), fused by algos/common/fused.py.

Per gradient step (SB3/SBX order): critic step with the soft TD target from the Polyak-averaged
target critics and a fresh a' ~ pi(.|s'), Polyak update, then (every `policy_delay` steps) the actor
step and the temperature step. DroQ is this module with dropout + layer norm in the critic.
"""

from __future__ import annotations

import jax

from rlbench.algos.common.layout import actor_kernels_t, critic_kernels_t, refresh, with_kernels_t
from rlbench.algos.common.learner import Learner, assemble_learner
from rlbench.algos.common.losses import actor_loss, critic_loss, soft_td_target
from rlbench.algos.common.steps import apply_loss, polyak
from rlbench.algos.common.temperature import current_alpha, temperature_step
from rlbench.algos.sac.config import SACConfig
from rlbench.algos.sac.state import SACNetworks, SACState, init_state, make_networks
from rlbench.buffers.uniform import UniformBuffer
from rlbench.networks.actor import sample_action
from rlbench.types import EnvSpec, Metrics, Transition

CRITIC_METRICS = ("train/critic_loss", "train/q_mean")
ACTOR_METRICS = ("train/actor_loss", "train/entropy", "train/alpha", "train/temperature_loss")


def target_entropy(cfg: SACConfig, spec: EnvSpec) -> float:
    """-dim(A) unless set."""
    return -float(spec.action_dim) if cfg.target_entropy is None else cfg.target_entropy


def critic_step(cfg: SACConfig, nets: SACNetworks, state: SACState, batch: Transition, key: jax.Array):
    next_action_key, target_dropout_key, dropout_key = jax.random.split(key, 3)
    alpha = current_alpha(state.temperature, cfg.ent_coef.initial)
    mean, log_std = nets.actor.apply({"params": state.actor.params}, batch.next_obs)
    next_action, next_log_prob = sample_action(mean, log_std, next_action_key)
    # Dropout is on in every critic call of training: DroQ's target critic is a dropout network too.
    next_q = nets.critic.apply(
        {"params": state.critic.target_params},
        batch.next_obs,
        next_action,
        dropout=True,
        rngs={"dropout": target_dropout_key},
    )
    target = soft_td_target(next_q, next_log_prob, batch.reward, batch.terminated, alpha, cfg.gamma)

    kernels_t = critic_kernels_t(state.transposed)

    def loss_fn(params):
        q = nets.critic.apply(
            with_kernels_t({"params": params}, kernels_t),
            batch.obs,
            batch.action,
            dropout=True,
            plain_layout=kernels_t is not None,
            rngs={"dropout": dropout_key},
        )
        return critic_loss(q, target), q

    critic, loss, q = apply_loss(state.critic, loss_fn)
    critic = critic.replace(target_params=polyak(critic.target_params, critic.params, cfg.tau))
    state = state.replace(critic=critic, transposed=refresh(state.transposed, critic=critic.params))
    return state, {"train/critic_loss": loss, "train/q_mean": q.mean()}


def actor_step(
    cfg: SACConfig, nets: SACNetworks, entropy_target: float, state: SACState, batch: Transition, key: jax.Array
) -> tuple[SACState, Metrics]:
    action_key, dropout_key = jax.random.split(key)
    alpha = current_alpha(state.temperature, cfg.ent_coef.initial)

    kernels_t = actor_kernels_t(state.transposed)

    def loss_fn(actor_params):
        mean, log_std = nets.actor.apply(
            with_kernels_t({"params": actor_params}, kernels_t), batch.obs, plain_layout=kernels_t is not None
        )
        action, log_prob = sample_action(mean, log_std, action_key)
        q = nets.critic.apply(
            {"params": state.critic.params}, batch.obs, action, dropout=True, rngs={"dropout": dropout_key}
        )
        return actor_loss(log_prob, q, alpha), log_prob

    actor, loss, log_prob = apply_loss(state.actor, loss_fn)
    entropy = -log_prob  # [B], per-sample estimate of H(pi(.|s))
    temperature, temperature_loss = temperature_step(state.temperature, entropy, entropy_target)
    metrics = {
        "train/actor_loss": loss,
        "train/entropy": entropy.mean(),
        "train/alpha": alpha,
        "train/temperature_loss": temperature_loss,
    }
    return state.replace(
        actor=actor, temperature=temperature, transposed=refresh(state.transposed, actor=actor.params)
    ), metrics


def make_learner(cfg: SACConfig, spec: EnvSpec, buffer: UniformBuffer) -> Learner[SACState]:
    """Bind SAC's pure functions to a config, an environment spec and a buffer."""
    nets = make_networks(cfg, spec)
    entropy_target = target_entropy(cfg, spec)
    return assemble_learner(
        cfg,
        buffer,
        nets.actor,
        actor_variables=lambda state: {"params": state.actor.params},
        init_fn=lambda key: init_state(cfg, spec, nets, key),
        critic_step=lambda state, batch, key: critic_step(cfg, nets, state, batch, key),
        actor_step=lambda state, batch, key: actor_step(cfg, nets, entropy_target, state, batch, key),
        critic_metric_names=CRITIC_METRICS,
        actor_metric_names=ACTOR_METRICS,
    )
