"""Tanh-squashed Gaussian actor (Haarnoja et al. 2018, appendix C) and its sampling functions.

a = tanh(u), u ~ N(mean, std^2);
log pi(a|s) = sum_i [ log N(u_i; mean_i, std_i) - log(1 - tanh(u_i)^2) ].
Actions live in [-1, 1]; the environment wrapper rescales them to the Box bounds.
"""

from __future__ import annotations

import math

import flax.linen as nn
import jax
import jax.numpy as jnp

from rlbench.networks.mlp import MLP, NetworkConfig

LOG_STD_MIN = -20.0
LOG_STD_MAX = 2.0


class SquashedGaussianActor(nn.Module):
    """Returns the mean and the clipped log standard deviation of the pre-tanh Gaussian."""

    action_dim: int
    config: NetworkConfig

    @nn.compact
    def __call__(
        self, obs: jax.Array, *, train: bool = False, plain_layout: bool = False
    ) -> tuple[jax.Array, jax.Array]:
        features = MLP(self.config, name="trunk")(obs, train=train, dropout=train, plain_layout=plain_layout)
        mean = nn.Dense(self.action_dim, name="mean")(features)
        log_std = nn.Dense(self.action_dim, name="log_std")(features)
        return mean, jnp.clip(log_std, LOG_STD_MIN, LOG_STD_MAX)


def log_one_minus_tanh_squared(u: jax.Array) -> jax.Array:
    """log(1 - tanh(u)^2) = 2 (log 2 - u - softplus(-2u)), stable for large |u| (no log of ~0)."""
    return 2.0 * (math.log(2.0) - u - jax.nn.softplus(-2.0 * u))


def sample_action(mean: jax.Array, log_std: jax.Array, key: jax.Array) -> tuple[jax.Array, jax.Array]:
    """Reparameterised sample a = tanh(mean + std * eps) and its log-probability, summed over action dims."""
    noise = jax.random.normal(key, mean.shape, mean.dtype)
    u = mean + jnp.exp(log_std) * noise
    gaussian_log_prob = -0.5 * noise**2 - log_std - 0.5 * math.log(2.0 * math.pi)
    log_prob = (gaussian_log_prob - log_one_minus_tanh_squared(u)).sum(axis=-1)
    return jnp.tanh(u), log_prob


def deterministic_action(mean: jax.Array) -> jax.Array:
    """The mode used for evaluation: tanh of the Gaussian mean."""
    return jnp.tanh(mean)
