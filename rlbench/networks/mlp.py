"""The MLP trunk shared by actors and critics, and the typed description of its architecture."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

import flax.linen as nn
import jax
import jax.numpy as jnp

from rlbench.networks.batch_renorm import BatchRenorm

Activation = Literal["relu", "tanh", "elu", "gelu", "silu", "leaky_relu"]
Precision = Literal["float32", "bfloat16"]
PRECISIONS: tuple[str, ...] = ("float32", "bfloat16")

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
    # Matrix products of the hidden layers: "bfloat16" rounds both operands to bfloat16 and accumulates
    # in float32; parameters, activations, normalisation statistics and losses stay float32.
    precision: Precision = "float32"


def bfloat16_dot_general(lhs, rhs, dimension_numbers, precision=None, preferred_element_type=None):
    """`lax.dot_general` on bfloat16 operands with a float32 result (mixed precision, as on GPUs).

    The backward products come from JAX's transpose rule and keep these dtypes; XLA:CPU runs the
    ones whose operands it would have to transpose in float32 (see benchmarks/README.md).
    """
    del preferred_element_type  # always float32: the sum of products is never rounded to bfloat16
    return jax.lax.dot_general(lhs.astype(jnp.bfloat16), rhs.astype(jnp.bfloat16), dimension_numbers,
                               precision=precision, preferred_element_type=jnp.float32)


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
        dot_general = bfloat16_dot_general if cfg.precision == "bfloat16" else jax.lax.dot_general
        for width in cfg.hidden:
            x = nn.Dense(width, dot_general=dot_general)(x)
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
