"""The MLP trunk shared by actors and critics, and the typed description of its architecture."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

import flax.linen as nn
import jax

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


class MLP(nn.Module):
    """Dense -> [Dropout] -> [LayerNorm] -> activation, per hidden layer (DroQ's order, Hiraoka et al. 2022).

    `train` turns dropout on. Dropout needs a "dropout" PRNG stream when it is on.
    """

    config: NetworkConfig

    @nn.compact
    def __call__(self, x: jax.Array, *, train: bool = False) -> jax.Array:
        activation = ACTIVATIONS[self.config.activation]
        for width in self.config.hidden:
            x = nn.Dense(width)(x)
            if self.config.dropout_rate > 0.0:
                x = nn.Dropout(rate=self.config.dropout_rate, deterministic=not train)(x)
            if self.config.layer_norm:
                x = nn.LayerNorm()(x)
            x = activation(x)
        return x
