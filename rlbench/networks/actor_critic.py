"""SB3's ActorCriticPolicy (PPO, A2C): one features extractor (the observation itself, or CnnPolicy's NatureCNN
over an image), separate policy and value MLPs on it, a linear action head (Gaussian mean or Categorical
logits), a state-independent log std, and a linear value head.

SB3's defaults: net_arch dict(pi=[64, 64], vf=[64, 64]), tanh, `ortho_init` with the gains of OpenAI
Baselines: sqrt(2) on every hidden layer and NatureCNN, 0.01 on the action head (a near-uniform first policy), 1 on
the value head, zero biases. Without `ortho_init` the layers keep PyTorch's default (weights and biases
uniform in +-1/sqrt(fan_in)), as SB3's then do.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import flax.linen as nn
import jax
import jax.numpy as jnp

from rlbench.networks.distributions import ActionDistribution, Categorical, DiagGaussian, StateDependentGaussian
from rlbench.networks.mlp import ACTIVATIONS, Activation
from rlbench.networks.nature_cnn import Features, extract, torch_default_uniform

HIDDEN_GAIN = math.sqrt(2.0)
ACTION_GAIN = 0.01
VALUE_GAIN = 1.0


@dataclass(frozen=True, kw_only=True)
class ActorCriticNetConfig:
    """RL Zoo's policy_kwargs for PPO/A2C: net_arch=dict(pi=..., vf=...), activation_fn, ortho_init,
    log_std_init (SB3's defaults), and the features extractor `policy` names."""

    features: Features = field(default_factory=Features)
    pi: tuple[int, ...] = (64, 64)
    vf: tuple[int, ...] = (64, 64)
    activation: Activation = "tanh"
    ortho_init: bool = True
    log_std_init: float = 0.0


class OrthoDense(nn.Module):
    """A Dense layer initialised as SB3's ActorCriticPolicy: orthogonal with `gain` and a zero bias, or
    PyTorch's default when `ortho_init` is off."""

    features: int
    gain: float
    ortho_init: bool

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        if self.ortho_init:
            kernel_init, bias_init = nn.initializers.orthogonal(self.gain), nn.initializers.zeros_init()
        else:
            kernel_init = bias_init = torch_default_uniform(x.shape[-1])
        return nn.Dense(self.features, kernel_init=kernel_init, bias_init=bias_init)(x)


class HiddenLayers(nn.Module):
    widths: tuple[int, ...]
    activation: Activation
    ortho_init: bool

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        for width in self.widths:
            x = ACTIVATIONS[self.activation](OrthoDense(width, HIDDEN_GAIN, self.ortho_init)(x))
        return x


class ActorCritic(nn.Module):
    """obs [B, obs_dim] -> (action distribution over B, V(obs) [B]). `discrete`: Categorical over
    `action_dim` actions; else a diagonal Gaussian over `action_dim` dimensions."""

    config: ActorCriticNetConfig
    action_dim: int
    discrete: bool
    gsde: bool = False  # state-dependent exploration: log_std [latent_dim, action_dim] (SB3's full_std)
    image_shape: tuple[int, ...] = ()  # an image observation's [height, width, channels]

    @nn.compact
    def __call__(self, obs: jax.Array) -> tuple[ActionDistribution, jax.Array]:
        cfg = self.config
        features = extract(cfg.features, self.image_shape, obs, "orthogonal" if cfg.ortho_init else "torch")
        policy_latent = HiddenLayers(cfg.pi, cfg.activation, cfg.ortho_init, name="pi")(features)
        value_latent = HiddenLayers(cfg.vf, cfg.activation, cfg.ortho_init, name="vf")(features)
        head = OrthoDense(self.action_dim, ACTION_GAIN, cfg.ortho_init, name="action_head")(policy_latent)
        value = OrthoDense(1, VALUE_GAIN, cfg.ortho_init, name="value_head")(value_latent).squeeze(-1)
        if self.discrete:
            return Categorical(logits=head), value
        log_std_init = nn.initializers.constant(cfg.log_std_init)
        if self.gsde:
            log_std = self.param("log_std", log_std_init, (policy_latent.shape[-1], self.action_dim))
            latent = jax.lax.stop_gradient(policy_latent)
            return StateDependentGaussian(mean=head, latent=latent, std=jnp.exp(log_std)), value
        log_std = self.param("log_std", log_std_init, (self.action_dim,))
        return DiagGaussian(mean=head, log_std=log_std), value
