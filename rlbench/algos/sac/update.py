"""SAC's fused training iteration: insert, sample, then `gradient_steps` updates in one `lax.scan`.

Per gradient step (SB3/SBX order): critic step with the soft TD target from the target critics and a
fresh a' ~ pi(.|s'), Polyak update of the target critics, then, every `policy_delay` steps, the actor
step and the temperature step. The policy-delay test reads a traced counter (`state.step`) under
`lax.cond`, so the update compiles once whatever the offset of the iteration.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from rlbench.algos.common.learner import Learner
from rlbench.algos.common.losses import actor_loss, critic_loss, soft_td_target, temperature_loss
from rlbench.algos.common.steps import apply_loss, fuse_steps, polyak, set_learning_rate
from rlbench.algos.sac.config import SACConfig
from rlbench.algos.sac.state import SACNetworks, SACState, current_alpha, init_state, make_networks
from rlbench.buffers.uniform import BufferState, UniformBuffer
from rlbench.networks.actor import deterministic_action, sample_action
from rlbench.types import EnvSpec, Metrics, Transition

CRITIC_METRICS = ("train/critic_loss", "train/q_mean")
ACTOR_METRICS = ("train/actor_loss", "train/entropy", "train/alpha", "train/temperature_loss")


def critic_step(
    cfg: SACConfig, nets: SACNetworks, state: SACState, batch: Transition, key: jax.Array
) -> tuple[SACState, Metrics]:
    next_action_key, target_dropout_key, dropout_key = jax.random.split(key, 3)
    mean, log_std = nets.actor.apply({"params": state.actor.params}, batch.next_obs)
    next_action, next_log_prob = sample_action(mean, log_std, next_action_key)
    # Critics run with train=True everywhere in training: DroQ's dropout is part of the target too.
    next_q = nets.critic.apply(
        {"params": state.critic.target_params}, batch.next_obs, next_action, True,
        rngs={"dropout": target_dropout_key},
    )
    target = soft_td_target(
        next_q, next_log_prob, batch.reward, batch.terminated, current_alpha(cfg, state), cfg.gamma
    )

    def loss_fn(params):
        q = nets.critic.apply(
            {"params": params}, batch.obs, batch.action, True, rngs={"dropout": dropout_key}
        )
        return critic_loss(q, target), q

    critic, loss, q = apply_loss(state.critic, loss_fn)
    critic = critic.replace(target_params=polyak(critic.target_params, critic.params, cfg.tau))
    return state.replace(critic=critic), {"train/critic_loss": loss, "train/q_mean": q.mean()}


def actor_and_temperature_step(
    cfg: SACConfig, nets: SACNetworks, target_entropy: float,
    state: SACState, batch: Transition, key: jax.Array,
) -> tuple[SACState, Metrics]:
    action_key, dropout_key = jax.random.split(key)
    alpha = current_alpha(cfg, state)

    def loss_fn(actor_params):
        mean, log_std = nets.actor.apply({"params": actor_params}, batch.obs)
        action, log_prob = sample_action(mean, log_std, action_key)
        q = nets.critic.apply(
            {"params": state.critic.params}, batch.obs, action, True, rngs={"dropout": dropout_key}
        )
        return actor_loss(log_prob, q, alpha), log_prob

    actor, loss, log_prob = apply_loss(state.actor, loss_fn)
    entropy = -log_prob  # [B], per-sample estimate of H(pi(.|s))
    temperature, temp_loss = state.temperature, jnp.zeros(())
    if temperature is not None:  # static: fixed alpha has no parameter and no optimizer step
        temperature, temp_loss, _ = apply_loss(
            temperature,
            lambda p: (temperature_loss(p["log_alpha"], entropy, target_entropy), None),
        )
    metrics = {
        "train/actor_loss": loss,
        "train/entropy": entropy.mean(),
        "train/alpha": alpha,
        "train/temperature_loss": temp_loss,
    }
    return state.replace(actor=actor, temperature=temperature), metrics


def skip_actor_step(state: SACState, batch: Transition, key: jax.Array) -> tuple[SACState, Metrics]:
    # Same pytree as the real branch; NaN metrics are dropped by the nanmean over the scan.
    return state, {name: jnp.full((), jnp.nan) for name in ACTOR_METRICS}


def make_learner(cfg: SACConfig, spec: EnvSpec, buffer: UniformBuffer) -> Learner[SACState]:
    """Bind SAC's pure functions to a config, an environment spec and a buffer."""
    nets = make_networks(cfg, spec)
    target_entropy = -float(spec.action_dim) if cfg.target_entropy is None else cfg.target_entropy

    def actor_step(state: SACState, batch: Transition, key: jax.Array) -> tuple[SACState, Metrics]:
        return actor_and_temperature_step(cfg, nets, target_entropy, state, batch, key)

    def gradient_step(state: SACState, batch_and_key) -> tuple[SACState, Metrics]:
        batch, key = batch_and_key
        critic_key, actor_key = jax.random.split(key)
        state, critic_metrics = critic_step(cfg, nets, state, batch, critic_key)
        # SB3/SBX count: the actor updates on gradient steps policy_delay, 2 * policy_delay, ...
        do_actor = (state.step + 1) % cfg.policy_delay == 0
        state, actor_metrics = jax.lax.cond(do_actor, actor_step, skip_actor_step, state, batch, actor_key)
        return state.replace(step=state.step + 1), critic_metrics | actor_metrics

    def gradient_steps(state: SACState, batches: Transition, keys: jax.Array, progress_remaining: jax.Array):
        actor_lr = cfg.learning_rate(progress_remaining)
        critic_lr = actor_lr if cfg.qf_learning_rate is None else jnp.asarray(cfg.qf_learning_rate)
        state = state.replace(
            actor=set_learning_rate(state.actor, actor_lr),
            critic=set_learning_rate(state.critic, critic_lr),
        )
        state, metrics = jax.lax.scan(gradient_step, state, (batches, keys))  # metrics [n_steps]
        metrics = {name: jnp.nanmean(value) for name, value in metrics.items()}
        metrics["train/learning_rate"] = actor_lr
        metrics["train/n_updates"] = state.step
        return state, metrics

    def update(state: SACState, buffer_state: BufferState, new: Transition, progress_remaining: jax.Array):
        buffer_state = buffer.add_fn(buffer_state, new)
        key, sample_key, steps_key = jax.random.split(state.key, 3)
        batch = buffer.sample_fn(buffer_state, sample_key, cfg.gradient_steps * cfg.batch_size)
        batches = fuse_steps(batch, cfg.gradient_steps)  # [gradient_steps, batch_size, ...]
        keys = jax.random.split(steps_key, cfg.gradient_steps)
        state, metrics = gradient_steps(state.replace(key=key), batches, keys, progress_remaining)
        return state, buffer_state, metrics

    def act(state: SACState, obs: jax.Array, key: jax.Array) -> tuple[jax.Array, jax.Array]:
        key, action_key = jax.random.split(key)
        mean, log_std = nets.actor.apply({"params": state.actor.params}, obs)
        action, _ = sample_action(mean, log_std, action_key)
        return action, key

    def act_deterministic(state: SACState, obs: jax.Array) -> jax.Array:
        mean, _ = nets.actor.apply({"params": state.actor.params}, obs)
        return deterministic_action(mean)

    return Learner(
        init_fn=lambda key: init_state(cfg, spec, nets, key),
        update_fn=update,
        gradient_steps_fn=gradient_steps,
        act_fn=act,
        act_deterministic_fn=act_deterministic,
        metric_names=(*CRITIC_METRICS, *ACTOR_METRICS, "train/learning_rate", "train/n_updates"),
    )
