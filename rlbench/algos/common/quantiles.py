"""Quantile critics (Kuznetsov et al. 2020, arXiv:2005.04269), TQC's and CrossQ's with n_quantiles: their
settings and objective, as pure functions.

Shapes: quantiles are [n_critics, B, n_quantiles]; the target is [B, n_target] with
n_target = (n_quantiles - top_quantiles_to_drop_per_net) x n_critics.
"""

from __future__ import annotations

from dataclasses import dataclass

import jax
import jax.numpy as jnp

from rlbench.algos.common.losses import CriticObjective


@dataclass(frozen=True)
class Quantiles:
    """Distributional critics (Kuznetsov et al. 2020): each of the n_critics critics outputs
    `n_quantiles` quantiles of the return; the TD target pools the next state's quantiles of all
    critics, sorts them and drops the top `top_quantiles_to_drop_per_net` x n_critics (the truncation
    that controls overestimation)."""

    n_quantiles: int = 25
    top_quantiles_to_drop_per_net: int = 2

    def n_target_quantiles(self, n_critics: int) -> int:
        return (self.n_quantiles - self.top_quantiles_to_drop_per_net) * n_critics


def pooled_atoms(next_quantiles: jax.Array) -> jax.Array:
    """[n_critics, B, n_quantiles] -> [B, n_critics * n_quantiles]: each sample's atoms of all critics."""
    n_critics, batch_size, n_quantiles = next_quantiles.shape
    return jnp.moveaxis(next_quantiles, 0, 1).reshape(batch_size, n_critics * n_quantiles)


def soft_atom_target(
    kept: jax.Array, next_log_prob: jax.Array, reward: jax.Array, terminated: jax.Array, alpha: jax.Array, gamma: float
) -> jax.Array:
    """y_j = r + gamma (1 - terminated) (kept_j - alpha log pi(a'|s')) for each kept atom [B, n_target], with
    no gradient. Only `terminated` stops the bootstrap."""
    target = reward[:, None] + gamma * (1.0 - terminated[:, None]) * (kept - alpha * next_log_prob[:, None])
    return jax.lax.stop_gradient(target)


def truncated_quantile_target(
    next_quantiles: jax.Array,
    next_log_prob: jax.Array,
    reward: jax.Array,
    terminated: jax.Array,
    alpha: jax.Array,
    gamma: float,
    quantiles: Quantiles,
) -> jax.Array:
    """The soft target of the n_target smallest of the next state's quantiles pooled over all critics
    (sorted ascending): dropping the largest ones is TQC's control of overestimation."""
    # The n_target smallest, ascending, as top_k of the negated atoms: on a CPU the full sort it replaces
    # took 5% of TQC's whole gradient step, this partial one too little to measure (benchmarks/README.md).
    n_target = quantiles.n_target_quantiles(next_quantiles.shape[0])
    kept = -jax.lax.top_k(-pooled_atoms(next_quantiles), n_target)[0]
    return soft_atom_target(kept, next_log_prob, reward, terminated, alpha, gamma)


def quantile_midpoints(n_quantiles: int) -> jax.Array:
    """tau_i = (i + 0.5) / n_quantiles, i = 0..n_quantiles-1 (SB3-contrib's scale)."""
    return (jnp.arange(n_quantiles, dtype=jnp.float32) + 0.5) / n_quantiles


def quantile_huber_loss(quantiles: jax.Array, target: jax.Array) -> jax.Array:
    """The quantile Huber loss (kappa = 1) of every critic's quantiles against every target atom:
    mean over critics, samples, quantiles and atoms of |tau_i - 1{delta < 0}| * Huber(delta),
    delta = target_j - z_i, tau_i = (i + 0.5) / n_quantiles (SB3-contrib's scale)."""
    tau = quantile_midpoints(quantiles.shape[-1])
    delta = target[None, :, None, :] - quantiles[..., None]  # [n_critics, B, n_quantiles, n_target]
    abs_delta = jnp.abs(delta)
    huber = jnp.where(abs_delta > 1.0, abs_delta - 0.5, 0.5 * delta**2)
    return (jnp.abs(tau[:, None] - (delta < 0).astype(jnp.float32)) * huber).mean()


def mean_of_quantiles(quantiles: jax.Array) -> jax.Array:
    """The actor's value of [n_critics, B, n_quantiles] quantiles: their mean over critics and quantiles, [B]."""
    return quantiles.mean(axis=(0, 2))


def quantile_objective(quantiles: Quantiles) -> CriticObjective:
    def target(
        next_q: jax.Array,
        next_log_prob: jax.Array,
        reward: jax.Array,
        terminated: jax.Array,
        alpha: jax.Array,
        gamma: float,
    ) -> jax.Array:
        return truncated_quantile_target(next_q, next_log_prob, reward, terminated, alpha, gamma, quantiles)

    return CriticObjective(target=target, loss=quantile_huber_loss, value=mean_of_quantiles)
