"""Losses of soft actor-critic (Haarnoja et al. 2018, arXiv:1812.05905), as pure functions.

Shapes: q values are [n_critics, B]; everything per sample is [B].
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal, NamedTuple

import jax
import jax.numpy as jnp

# The weight of (H - H_target) in the temperature's loss: log alpha (SB3's, and SBX's since 0.18) or alpha
# (SBX's before 0.18). The `temperature_loss` setting (rlbench.algos.soft.temperature.TEMPERATURE_LOSSES).
TemperatureLoss = Literal["log_alpha", "alpha"]
# (next_q, next_log_prob, reward, terminated, alpha, gamma) -> the TD target
TargetFn = Callable[[jax.Array, jax.Array, jax.Array, jax.Array, jax.Array, float], jax.Array]


def soft_td_target(
    next_q: jax.Array,
    next_log_prob: jax.Array,
    reward: jax.Array,
    terminated: jax.Array,
    alpha: jax.Array,
    gamma: float,
) -> jax.Array:
    """Soft Bellman target y = r + gamma (1 - terminated) (min_i Q_i(s', a') - alpha log pi(a'|s')).

    Only `terminated` stops the bootstrap: a time-limit truncation is not the end of the MDP.
    """
    next_v = next_q.min(axis=0) - alpha * next_log_prob  # [n_critics, B] -> [B]
    return jax.lax.stop_gradient(reward + gamma * (1.0 - terminated) * next_v)


def critic_loss(q: jax.Array, target: jax.Array) -> jax.Array:
    """0.5 * sum over critics of the mean squared TD error (SB3/SBX scale)."""
    return 0.5 * ((q - target[None, :]) ** 2).mean(axis=1).sum()


def actor_loss(log_prob: jax.Array, q_value: jax.Array, alpha: jax.Array) -> jax.Array:
    """E[alpha log pi(a|s) - Q(s, a)], a ~ pi(.|s) reparameterised (eq. 12). `q_value` [B] is the
    critics' estimate: the minimum over critics in SAC and CrossQ, the mean of all quantiles in TQC."""
    return (alpha * log_prob - q_value).mean()


def temperature_loss(
    log_alpha: jax.Array, entropy: jax.Array, target_entropy: float, weight: TemperatureLoss = "log_alpha"
) -> jax.Array:
    """weight * stop_gradient(H - H_target), averaged over the batch; `weight` is log alpha (SB3's loss, and
    SBX's since 0.18) or alpha = exp(log_alpha) (SBX's before 0.18: -alpha * (log_prob + H_target)).

    The gradient step is taken on log alpha rather than alpha (eq. 18 reparameterised): alpha stays
    positive, and a step changes alpha by a factor, which is stable across the many orders of
    magnitude alpha moves through. When the entropy is below target the loss slopes down in log
    alpha, so descent raises alpha. With the alpha weight the gradient in log alpha is alpha times
    the other's: the same sign, scaled; Adam divides by the gradient's running scale, so the two
    steps differ only as far as alpha changes within Adam's averaging window.
    """
    scale = log_alpha if weight == "log_alpha" else jnp.exp(log_alpha)
    return (scale * jax.lax.stop_gradient(entropy - target_entropy)).mean()


class CriticObjective(NamedTuple):
    """How a learner's critics are trained and read, given the critics' output q:
    target(next_q, next_log_prob, reward, terminated, alpha, gamma) -> the TD target (stop_gradient);
    loss(q, target) -> the critic loss;
    value(q) -> [B], the critics' estimate of Q(s, a) that the actor maximises.
    SAC's below (SOFT_Q); the quantile critics' in rlbench/algos/common/quantiles.py."""

    target: TargetFn
    loss: Callable[[jax.Array, jax.Array], jax.Array]
    value: Callable[[jax.Array], jax.Array]


def min_over_critics(q: jax.Array) -> jax.Array:
    """The pessimistic value of [n_critics, B] Q values: [B] (clipped double Q)."""
    return q.min(axis=0)


SOFT_Q = CriticObjective(target=soft_td_target, loss=critic_loss, value=min_over_critics)
