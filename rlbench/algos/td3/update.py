"""TD3's gradient step (Fujimoto et al. 2018), fused by algos/common/fused.py.

Per gradient step: the critic step, towards y = r + gamma (1 - terminated) min_i Q'_i(s', a'), with
a' = clip(mu'(s') + clip(eps, -c, c), -1, 1), eps ~ N(0, target_policy_noise^2) (target policy smoothing).
Every `policy_delay` steps (the fused scan's traced counter), the actor step, maximising the minimum of the
critics at (s, mu(s)) as SBX's TD3 (SB3's reads the first critic), then the Polyak update of the target
actor and critics (delayed, as SB3's). DDPG is this learner with one critic, no smoothing and no delay.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from rlbench.algos.common.learner import Learner, assemble_learner
from rlbench.algos.common.losses import critic_loss
from rlbench.algos.common.steps import apply_loss, polyak
from rlbench.algos.td3.acting import td3_acting
from rlbench.algos.td3.config import TD3Config
from rlbench.algos.td3.state import TD3State, init_state
from rlbench.networks.actor import DeterministicActor
from rlbench.networks.critic import CriticEnsemble
from rlbench.types import EnvSpec, Metrics, Params, Transition

CRITIC_METRICS = ("train/critic_loss", "train/q_mean")
ACTOR_METRICS = ("train/actor_loss",)


def smoothed_target_action(cfg: TD3Config, target_action: jax.Array, key: jax.Array) -> jax.Array:
    """a' = clip(mu'(s') + clip(eps, -target_noise_clip, target_noise_clip), -1, 1), eps ~ N(0, noise^2)."""
    if cfg.target_policy_noise == 0 or cfg.target_noise_clip == 0:  # static: DDPG, no smoothing
        return target_action
    eps = cfg.target_policy_noise * jax.random.normal(key, target_action.shape, target_action.dtype)
    return jnp.clip(target_action + jnp.clip(eps, -cfg.target_noise_clip, cfg.target_noise_clip), -1.0, 1.0)


def td_target(next_q: jax.Array, reward: jax.Array, terminated: jax.Array, gamma: float) -> jax.Array:
    """y = r + gamma (1 - terminated) min_i Q'_i(s', a'); next_q [n_critics, B]. Only `terminated` stops the
    bootstrap: a time-limit truncation is not the end of the MDP."""
    return jax.lax.stop_gradient(reward + gamma * (1.0 - terminated) * next_q.min(axis=0))


def critic_step(cfg: TD3Config, state: TD3State, batch: Transition, key: jax.Array) -> tuple[TD3State, Metrics]:
    noise_key, target_dropout_key, dropout_key = jax.random.split(key, 3)
    target_action = state.actor.apply_fn(state.actor.variables(state.actor.target_params), batch.next_obs)
    next_action = smoothed_target_action(cfg, target_action, noise_key)
    next_q = state.critic.apply_fn(
        state.critic.variables(state.critic.target_params),
        batch.next_obs,
        next_action,
        dropout=True,
        rngs={"dropout": target_dropout_key},
    )
    target = td_target(next_q, batch.reward, batch.terminated, cfg.gamma)

    def loss_fn(params: Params) -> tuple[jax.Array, jax.Array]:
        q = state.critic.apply_training(params, batch.obs, batch.action, dropout=True, rngs={"dropout": dropout_key})
        return critic_loss(q, target), q

    critic, loss, q = apply_loss(state.critic, loss_fn)
    return state.replace(critic=critic), {"train/critic_loss": loss, "train/q_mean": q.mean()}


def actor_step(cfg: TD3Config, state: TD3State, batch: Transition, key: jax.Array) -> tuple[TD3State, Metrics]:
    """Ascend min_i Q_i(s, mu(s)), then move both targets towards their networks (tau)."""

    def loss_fn(actor_params: Params) -> tuple[jax.Array, None]:
        action = state.actor.apply_training(actor_params, batch.obs)
        q = state.critic.apply_fn(state.critic.variables(), batch.obs, action, dropout=True, rngs={"dropout": key})
        return -q.min(axis=0).mean(), None

    actor, loss, _ = apply_loss(state.actor, loss_fn)
    actor = actor.replace(target_params=polyak(actor.target_params, actor.params, cfg.tau))
    critic = state.critic.replace(target_params=polyak(state.critic.target_params, state.critic.params, cfg.tau))
    return state.replace(actor=actor, critic=critic), {"train/actor_loss": loss}


def make_learner(cfg: TD3Config, spec: EnvSpec) -> Learner[TD3State]:
    """Bind TD3's pure functions to a config and an environment spec."""
    actor = DeterministicActor(action_dim=spec.action_dim, config=cfg.actor)
    critic = CriticEnsemble(config=cfg.critic, n_critics=cfg.n_critics)
    return assemble_learner(
        cfg,
        spec,
        td3_acting(cfg.action_noise),
        init_fn=lambda key: init_state(cfg, spec, actor, critic, key),
        critic_step=lambda state, batch, key: critic_step(cfg, state, batch, key),
        actor_step=lambda state, batch, key: actor_step(cfg, state, batch, key),
        critic_metric_names=CRITIC_METRICS,
        actor_metric_names=ACTOR_METRICS,
    )
