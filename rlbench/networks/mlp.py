"""The MLP trunk shared by actors and critics, and the typed description of its architecture."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

import flax.linen as nn
import jax

from rlbench.networks.batch_renorm import BatchRenorm

Activation = Literal["relu", "tanh", "elu", "gelu", "silu", "leaky_relu"]

ACTIVATIONS: dict[str, Callable[[jax.Array], jax.Array]] = {
    "relu": nn.relu,
    "tanh": nn.tanh,
    "elu": nn.elu,
    "gelu": nn.gelu,
    "silu": nn.silu,
    "leaky_relu": nn.leaky_relu,
}


@dataclass(frozen=True, kw_only=True)
class NetworkConfig:
    """Architecture of one MLP trunk (actor or critic)."""

    hidden: tuple[int, ...] = (256, 256)
    activation: Activation = "relu"
    dropout_rate: float = 0.0  # DroQ: 0.01 on the critic
    layer_norm: bool = False  # DroQ: True on the critic
    batch_norm: bool = False  # CrossQ: BatchRenorm on the input and after every hidden activation
    batch_norm_momentum: float = 0.99
    renorm_warmup_steps: int = 100_000


class MLP(nn.Module):
    """[BatchRenorm] -> per hidden layer: Dense -> [Dropout] -> [LayerNorm] -> activation -> [BatchRenorm].

    DroQ's order (Hiraoka et al. 2022) with CrossQ's BatchRenorm placement (Bhatt et al. 2024).
    `train` puts BatchRenorm in training mode (batch statistics, running averages updated: apply
    with mutable=["batch_stats"]); `dropout` turns dropout on (needs a "dropout" PRNG stream). They are
    separate because CrossQ's actor loss reads the critic in evaluation mode with dropout still on.
    """

    config: NetworkConfig

    @nn.compact
    def __call__(self, x: jax.Array, *, train: bool = False, dropout: bool = False) -> jax.Array:
        cfg = self.config
        activation = ACTIVATIONS[cfg.activation]
        if cfg.batch_norm:
            x = self._batch_renorm(x, train)
        for width in cfg.hidden:
            x = nn.Dense(width)(x)
            if cfg.dropout_rate > 0.0:
                x = nn.Dropout(rate=cfg.dropout_rate, deterministic=not dropout)(x)
            if cfg.layer_norm:
                x = nn.LayerNorm()(x)
            x = activation(x)
            if cfg.batch_norm:
                x = self._batch_renorm(x, train)
        return x

    def _batch_renorm(self, x: jax.Array, train: bool) -> jax.Array:
        return BatchRenorm(momentum=self.config.batch_norm_momentum,
                           warmup_steps=self.config.renorm_warmup_steps)(x, train)
