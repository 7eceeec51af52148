"""PPO's loss on one minibatch and SB3's training metrics (stable_baselines3/ppo/ppo.py, PPO.train).

    r = exp(log pi(a|s) - log pi_old(a|s))
    L_policy = -mean(min(r A, clip(r, 1 - eps, 1 + eps) A))             (Schulman et al. 2017, eq. 7)
    V_pred   = V_old + clip(V - V_old, -eps_vf, eps_vf) with clip_range_vf, else V
    L_value  = mean((R - V_pred)^2)     (SB3's clipped value loss: not the max of clipped and unclipped)
    L_entropy = -mean(H(pi(.|s)))
    L = L_policy + ent_coef * L_entropy + vf_coef * L_value
A is normalized per minibatch when normalize_advantage: (A - mean) / (std + 1e-8), with PyTorch's
unbiased std (ddof 1) as SB3 computes it.
A minibatch may carry a `weight` (1 for a sample, 0 for padding): an epoch whose batch_size does not divide
the rollout ends, as SB3's, with a smaller minibatch, which the fused scan holds padded to the others' size;
every mean above is then over its samples only.
Metrics: approx_kl = mean((r - 1) - log r) (the low-variance KL estimator SB3 uses for target_kl),
clip_fraction = mean(|r - 1| > eps).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp

from rlbench.networks.distributions import ActionDistribution
from rlbench.types import Metrics, Params

ADVANTAGE_EPSILON = 1e-8


class Minibatch(NamedTuple):
    """B samples of a flattened rollout with their GAE targets."""

    obs: jax.Array  # [B, obs_dim]
    action: jax.Array  # [B, action_dim] or [B]
    old_value: jax.Array  # [B]
    old_log_prob: jax.Array  # [B]
    advantage: jax.Array  # [B]
    returns: jax.Array  # [B]
    weight: jax.Array | None = None  # [B] 1 for a sample, 0 for padding (None: all samples)


class LossSettings(NamedTuple):
    """The loss's coefficients this update: the clip ranges are schedule values (traced)."""

    clip_range: jax.Array
    clip_range_vf: jax.Array | None
    ent_coef: float
    vf_coef: float
    normalize_advantage: bool


def mean(x: jax.Array, weight: jax.Array | None = None) -> jax.Array:
    """The mean over a minibatch's samples (`weight` 0 marks padding)."""
    return x.mean() if weight is None else (x * weight).sum() / weight.sum()


def normalized(advantage: jax.Array, weight: jax.Array | None = None) -> jax.Array:
    if weight is None:
        if advantage.shape[0] < 2:  # SB3 skips a minibatch of one: its std is undefined
            return advantage
        return (advantage - advantage.mean()) / (advantage.std(ddof=1) + ADVANTAGE_EPSILON)
    count = weight.sum()
    center = mean(advantage, weight)
    std = jnp.sqrt((weight * (advantage - center) ** 2).sum() / jnp.maximum(count - 1.0, 1.0))
    return jnp.where(count < 2, advantage, (advantage - center) / (std + ADVANTAGE_EPSILON))


def clipped_surrogate_loss(
    ratio: jax.Array, advantage: jax.Array, clip_range: jax.Array, weight: jax.Array | None = None
) -> jax.Array:
    clipped_ratio = jnp.clip(ratio, 1.0 - clip_range, 1.0 + clip_range)
    return -mean(jnp.minimum(ratio * advantage, clipped_ratio * advantage), weight)


def value_loss(
    value: jax.Array,
    old_value: jax.Array,
    returns: jax.Array,
    clip_range_vf: jax.Array | None,
    weight: jax.Array | None = None,
) -> jax.Array:
    if clip_range_vf is not None:
        value = old_value + jnp.clip(value - old_value, -clip_range_vf, clip_range_vf)
    return mean((returns - value) ** 2, weight)


def approx_kl(log_ratio: jax.Array, weight: jax.Array | None = None) -> jax.Array:
    return mean((jnp.exp(log_ratio) - 1.0) - log_ratio, weight)


def explained_variance(predicted: jax.Array, target: jax.Array) -> jax.Array:
    """1 - Var[target - predicted] / Var[target]; NaN when the target does not vary (SB3's utils)."""
    target_variance = target.var()
    return jnp.where(target_variance == 0, jnp.nan, 1.0 - (target - predicted).var() / target_variance)


def ppo_loss(
    params: Params,
    apply_fn: Callable[..., tuple[ActionDistribution, jax.Array]],
    batch: Minibatch,
    settings: LossSettings,
) -> tuple[jax.Array, Metrics]:
    """L and its parts on one minibatch; differentiable in `params`."""
    distribution, value = apply_fn({"params": params}, batch.obs)
    log_prob = distribution.log_prob(batch.action)
    weight = batch.weight
    advantage = normalized(batch.advantage, weight) if settings.normalize_advantage else batch.advantage
    log_ratio = log_prob - batch.old_log_prob
    ratio = jnp.exp(log_ratio)
    policy_loss = clipped_surrogate_loss(ratio, advantage, settings.clip_range, weight)
    critic_loss = value_loss(value, batch.old_value, batch.returns, settings.clip_range_vf, weight)
    entropy_loss = -mean(distribution.entropy(), weight)
    loss = policy_loss + settings.ent_coef * entropy_loss + settings.vf_coef * critic_loss
    metrics = {
        "train/policy_gradient_loss": policy_loss,
        "train/value_loss": critic_loss,
        "train/entropy_loss": entropy_loss,
        "train/loss": loss,
        "train/approx_kl": jax.lax.stop_gradient(approx_kl(log_ratio, weight)),
        "train/clip_fraction": jax.lax.stop_gradient(mean(jnp.abs(ratio - 1.0) > settings.clip_range, weight)),
    }
    return loss, metrics
