"""Tanh-squashed Gaussian actors (Haarnoja et al. 2018, appendix C), with or without gSDE, and the
action distributions they return; and the deterministic tanh actor of TD3 and DDPG.

a = tanh(u), u ~ N(mean, sigma^2);
log pi(a|s) = sum_i [ log N(u_i; mean_i, sigma_i) - log(1 - tanh(u_i)^2) ].
Actions live in [-1, 1]; the environment wrapper rescales them to the Box bounds.

Plain SAC noise: sigma = exp(log_std(s)), a fresh Gaussian draw per action.
gSDE (generalized state-dependent exploration, Raffin et al. 2021): u = mean(s) + z(s) W, with z(s) the
actor's last hidden features and W [latent, action] an exploration matrix, W_ij ~ N(0, std_ij^2), whose
std is a learned parameter. W is held for a while (the learner state keeps one per env, resampled every
`sde_sample_freq` env steps and at each rollout), so exploration is smooth in time and a function of the
state. For one W, u given s is Gaussian with sigma_j^2 = sum_i z_i(s)^2 std_ij^2, the density used for the
log-probability, as SB3's.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import flax.linen as nn
import jax
import jax.numpy as jnp
from flax import struct

from rlbench.networks.mlp import NetworkConfig
from rlbench.networks.trunk import make_trunk

LOG_STD_MIN = -20.0
LOG_STD_MAX = 2.0
GSDE_EPSILON = 1e-6  # added to sigma^2, as SB3's StateDependentNoiseDistribution


@dataclass(frozen=True, kw_only=True)
class GSDEConfig:
    """gSDE's settings, RL Zoo's keys: use_sde (this config is set), sde_sample_freq, use_sde_at_warmup, and
    policy_kwargs log_std_init, use_expln, full_std, clip_mean (defaults as SB3's SAC policy)."""

    n_envs: int = 1  # one exploration matrix per env (from the run's n_envs; not a file key)
    sample_freq: int = -1  # resample every n vector steps within a rollout; -1: only at each rollout's start
    at_warmup: bool = False  # gSDE actions instead of uniform ones before learning_starts
    log_std_init: float = -3.0
    use_expln: bool = False  # std = exp(x) for x <= 0, log1p(x) + 1 above: grows slower than exp
    full_std: bool = True  # one std per (latent, action) pair; False: one per latent feature
    clip_mean: float = 2.0  # the pre-tanh mean clipped to [-clip_mean, clip_mean] (hard tanh); 0: off


def log_one_minus_tanh_squared(u: jax.Array) -> jax.Array:
    """log(1 - tanh(u)^2) = 2 (log 2 - u - softplus(-2u)), stable for large |u| (no log of ~0)."""
    return 2.0 * (math.log(2.0) - u - jax.nn.softplus(-2.0 * u))


def squashed_log_prob(u: jax.Array, mean: jax.Array, sigma_log: jax.Array) -> jax.Array:
    """log pi(tanh(u)) for u ~ N(mean, exp(sigma_log)^2), summed over action dims. It is computed at u
    itself: recovering u as atanh(a), as SB3 does, loses it where tanh saturates in float32."""
    z = (u - mean) * jnp.exp(-sigma_log)
    gaussian_log_prob = -0.5 * z**2 - sigma_log - 0.5 * math.log(2.0 * math.pi)
    return (gaussian_log_prob - log_one_minus_tanh_squared(u)).sum(axis=-1)


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


class SquashedGaussian(struct.PyTreeNode):
    """pi(.|s) of a batch of states: tanh(N(mean, exp(log_std)^2)), [B, action_dim] each."""

    mean: jax.Array
    log_std: jax.Array

    def sample(self, key: jax.Array) -> tuple[jax.Array, jax.Array]:
        """(actions, log-probabilities), reparameterised."""
        return sample_action(self.mean, self.log_std, key)

    def mode(self) -> jax.Array:
        return deterministic_action(self.mean)


class StateDependentNoise(struct.PyTreeNode):
    """pi(.|s) of a batch of states under gSDE: tanh(mean + latent W), W_ij ~ N(0, std_ij^2).

    mean [B, action_dim]; latent [B, latent_dim] (the actor's features, with no gradient through the
    noise, as SB3's default learn_features=False); std [latent_dim, action_dim], a function of the
    learned parameter, so a reparameterised W carries the gradient to it."""

    mean: jax.Array
    latent: jax.Array
    std: jax.Array

    def sigma_log(self) -> jax.Array:
        """log sigma [B, action_dim] of u given s, for one draw of W: sigma^2 = latent^2 @ std^2 + epsilon."""
        return 0.5 * jnp.log(self.latent**2 @ self.std**2 + GSDE_EPSILON)

    def exploration_matrices(self, key: jax.Array, n: int | None = None) -> jax.Array:
        """W ~ N(0, std^2): [latent_dim, action_dim], or n of them [n, latent_dim, action_dim]."""
        shape = self.std.shape if n is None else (n, *self.std.shape)
        return self.std * jax.random.normal(key, shape, self.std.dtype)

    def sample(self, key: jax.Array) -> tuple[jax.Array, jax.Array]:
        """(actions, log-probabilities) with one fresh W for the whole batch, reparameterised (training)."""
        u = self.mean + self.latent @ self.exploration_matrices(key)
        return jnp.tanh(u), squashed_log_prob(u, self.mean, self.sigma_log())

    def explore(self, matrices: jax.Array) -> jax.Array:
        """Actions with held exploration matrices, one per row ([B, latent_dim, action_dim]): collection."""
        return jnp.tanh(self.mean + jnp.einsum("bl,bla->ba", self.latent, matrices))

    def mode(self) -> jax.Array:
        return deterministic_action(self.mean)


def gsde_std(log_std: jax.Array, gsde: GSDEConfig, action_dim: int) -> jax.Array:
    """std [latent_dim, action_dim] from the learned log_std ([latent_dim, action_dim], or [latent_dim, 1]
    without full_std), through exp or, with use_expln, the slower-growing expln."""
    if gsde.use_expln:
        # exp(x) for x <= 0 and log1p(x) + 1 above; the where keeps log1p's argument valid on both sides.
        std = jnp.where(log_std <= 0, jnp.exp(jnp.minimum(log_std, 0.0)), jnp.log1p(jnp.maximum(log_std, 0.0)) + 1.0)
    else:
        std = jnp.exp(log_std)
    return jnp.broadcast_to(std, (log_std.shape[0], action_dim))


class SquashedGaussianActor(nn.Module):
    """The actor: a trunk (MLP or SimBa, networks/trunk.py), then the mean and either a state-dependent
    log std (SAC) or, with `gsde`, a learned log std of the exploration matrix's entries. Returns a
    SquashedGaussian or StateDependentNoise."""

    action_dim: int
    config: NetworkConfig
    gsde: GSDEConfig | None = None

    @nn.compact
    def __call__(
        self, obs: jax.Array, *, train: bool = False, plain_layout: bool = False
    ) -> SquashedGaussian | StateDependentNoise:
        features = make_trunk(self.config)(obs, train=train, dropout=train, plain_layout=plain_layout)
        mean = nn.Dense(self.action_dim, name="mean")(features)
        if self.gsde is None:
            log_std = nn.Dense(self.action_dim, name="log_std")(features)
            return SquashedGaussian(mean, jnp.clip(log_std, LOG_STD_MIN, LOG_STD_MAX))
        if self.gsde.clip_mean > 0:  # SB3's Hardtanh on the mean: keeps tanh out of saturation
            mean = jnp.clip(mean, -self.gsde.clip_mean, self.gsde.clip_mean)
        columns = self.action_dim if self.gsde.full_std else 1
        log_std = self.param(
            "log_std", nn.initializers.constant(self.gsde.log_std_init), (features.shape[-1], columns), jnp.float32
        )
        std = gsde_std(log_std, self.gsde, self.action_dim)
        return StateDependentNoise(mean, jax.lax.stop_gradient(features), std)

    def exploration_std(self) -> jax.Array:
        """std [latent_dim, action_dim] of the exploration matrices' entries (gSDE only): what a resample draws
        from, read from the parameters alone (apply with method="exploration_std")."""
        assert self.gsde is not None, "exploration_std: an actor without gSDE has a state-dependent std"
        return gsde_std(self.variables["params"]["log_std"], self.gsde, self.action_dim)


class DeterministicActor(nn.Module):
    """mu(s) = tanh(linear(trunk(s))): the action in [-1, 1] (SBX's TD3 actor); the trunk is the config's
    family's (MLP or SimBa)."""

    action_dim: int
    config: NetworkConfig

    @nn.compact
    def __call__(self, obs: jax.Array, *, train: bool = False, plain_layout: bool = False) -> jax.Array:
        features = make_trunk(self.config)(obs, train=train, dropout=train, plain_layout=plain_layout)
        return jnp.tanh(nn.Dense(self.action_dim, name="mu")(features))
