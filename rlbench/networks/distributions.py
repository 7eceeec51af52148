"""The action distributions of on-policy actors (PPO, A2C), as SB3's DiagGaussianDistribution and
CategoricalDistribution: log-probability, entropy, sample and mode of a batch of distributions.

Diagonal Gaussian, unsquashed (no tanh), with one state-independent log std per action dimension:
    log pi(a|s) = sum_i [ -(a_i - mu_i)^2 / (2 sigma_i^2) - log sigma_i - log(2 pi) / 2 ]
    H = sum_i [ 1/2 + log(2 pi) / 2 + log sigma_i ]
Categorical over n actions from logits l: log pi(a|s) = log_softmax(l)_a, H = -sum_a p_a log p_a.

A Gaussian sample is unbounded. As SB3's PPO, it is clipped to the Box bounds only when the env is stepped
(`clip_to_bounds`); the rollout stores the unclipped sample and its log-probability, so the ratio of the
update compares the densities of the same action.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
from flax import struct

HALF_LOG_TWO_PI = 0.5 * math.log(2.0 * math.pi)
GSDE_EPSILON = 1e-6  # added to gSDE's variance, as SB3's StateDependentNoiseDistribution


class DiagGaussian(struct.PyTreeNode):
    mean: jax.Array  # [B, action_dim]
    log_std: jax.Array  # [action_dim], shared by the batch (SB3's state-independent log_std)

    def log_prob(self, action: jax.Array) -> jax.Array:
        z = (action - self.mean) * jnp.exp(-self.log_std)
        return (-0.5 * z**2 - self.log_std - HALF_LOG_TWO_PI).sum(axis=-1)  # [B]

    def entropy(self) -> jax.Array:
        per_dim = jnp.broadcast_to(0.5 + HALF_LOG_TWO_PI + self.log_std, self.mean.shape)
        return per_dim.sum(axis=-1)  # [B]

    def sample(self, key: jax.Array) -> jax.Array:
        return self.mean + jnp.exp(self.log_std) * jax.random.normal(key, self.mean.shape, self.mean.dtype)

    def mode(self) -> jax.Array:
        return self.mean


class Categorical(struct.PyTreeNode):
    logits: jax.Array  # [B, n_actions]

    def log_prob(self, action: jax.Array) -> jax.Array:
        log_p = jax.nn.log_softmax(self.logits)
        return jnp.take_along_axis(log_p, action.astype(jnp.int32)[..., None], axis=-1).squeeze(-1)  # [B]

    def entropy(self) -> jax.Array:
        log_p = jax.nn.log_softmax(self.logits)
        return -(jnp.exp(log_p) * log_p).sum(axis=-1)  # [B]

    def sample(self, key: jax.Array) -> jax.Array:
        return jax.random.categorical(key, self.logits).astype(jnp.int32)

    def mode(self) -> jax.Array:
        return jnp.argmax(self.logits, axis=-1).astype(jnp.int32)


class StateDependentGaussian(struct.PyTreeNode):
    """gSDE for on-policy actors (Raffin et al. 2021; SB3's StateDependentNoiseDistribution with full_std and
    no squashing): a = mean + latent W, W_ij ~ N(0, std_ij^2) held for a while (the learner state keeps one W
    per env). Given s and one W the action is Gaussian with sigma^2 = latent^2 @ std^2 + 1e-6 per dimension,
    the density of log_prob and entropy. `latent` (the policy network's last features) carries no gradient
    into the noise (SB3's learn_features=False)."""

    mean: jax.Array  # [B, action_dim]
    latent: jax.Array  # [B, latent_dim], gradient stopped
    std: jax.Array  # [latent_dim, action_dim] = exp(log_std)

    def log_std(self) -> jax.Array:
        return 0.5 * jnp.log(self.latent**2 @ self.std**2 + GSDE_EPSILON)

    def log_prob(self, action: jax.Array) -> jax.Array:
        return DiagGaussian(self.mean, self.log_std()).log_prob(action)

    def entropy(self) -> jax.Array:
        return DiagGaussian(self.mean, self.log_std()).entropy()

    def exploration_matrices(self, key: jax.Array, n: int) -> jax.Array:
        """n matrices W [n, latent_dim, action_dim] (one per env)."""
        return self.std * jax.random.normal(key, (n, *self.std.shape), self.std.dtype)

    def explore(self, matrices: jax.Array) -> jax.Array:
        """The actions with held matrices, one per row ([B, latent_dim, action_dim])."""
        return self.mean + jnp.einsum("bl,bla->ba", self.latent, matrices)

    def sample(self, key: jax.Array) -> jax.Array:
        """One fresh W for the whole batch (enjoy.py --stochastic)."""
        return self.mean + self.latent @ self.exploration_matrices(key, 1)[0]

    def mode(self) -> jax.Array:
        return self.mean


ActionDistribution = DiagGaussian | Categorical | StateDependentGaussian


def clip_to_bounds(action: jax.Array, low: jax.Array, high: jax.Array) -> jax.Array:
    """The action the env receives from a Gaussian sample (SB3's PPO clips, it does not squash)."""
    return jnp.clip(action, low, high)
