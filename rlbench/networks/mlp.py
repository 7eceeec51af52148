"""The MLP trunk shared by actors and critics, and the typed description of its architecture."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal, overload

import flax.linen as nn
import jax

from rlbench.networks.batch_renorm import BatchRenorm
from rlbench.networks.dropout import Dropout
from rlbench.networks.plain_layout import PairDropout, PairLayerNorm, PlainLayoutDense

Activation = Literal["relu", "tanh", "elu", "gelu", "silu", "leaky_relu"]
Precision = Literal["float32", "bfloat16"]
PRECISIONS: tuple[Precision, ...] = ("float32", "bfloat16")
# The trunk: "mlp", the layers of `MLP` below; "simba", SimBa's residual blocks (networks/simba.py).
Family = Literal["mlp", "simba"]

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
    """Architecture of one trunk (actor or critic): an MLP, or SimBa's residual blocks."""

    family: Family = "mlp"
    hidden: tuple[int, ...] = (256, 256)  # simba: one residual block of this width per entry (all equal)
    activation: Activation = "relu"
    dropout_rate: float = 0.0  # DroQ: 0.01 on the critic
    layer_norm: bool = False  # DroQ: True on the critic (simba: always normalised, the flag changes nothing)
    # CrossQ: BatchRenorm on the input and after every hidden activation; simba: BatchRenorm on the input and
    # in place of each of its LayerNorms (as SBX's SimbaCrossQPolicy)
    batch_norm: bool = False
    batch_norm_momentum: float = 0.99
    renorm_warmup_steps: int = 100_000
    # Matrix products of the hidden layers: "bfloat16" rounds both operands to bfloat16 and accumulates
    # in float32; parameters, activations, normalisation statistics and losses stay float32.
    precision: Precision = "float32"


def plain_layout_applies(cfg: NetworkConfig) -> bool:
    """Whether a network trains through plain-layout products (networks/plain_layout.py): bfloat16 ones."""
    return cfg.precision == "bfloat16"


class MLP(nn.Module):
    """[BatchRenorm] -> per hidden layer: Dense -> [Dropout] -> [LayerNorm] -> activation -> [BatchRenorm].

    DroQ's order (Hiraoka et al. 2022) with CrossQ's BatchRenorm placement (Bhatt et al. 2024).
    `train` puts BatchRenorm in training mode (batch statistics, running averages updated: apply
    with mutable=["batch_stats"]); `dropout` turns dropout on (needs a "dropout" PRNG stream). They are
    separate because CrossQ's actor loss reads the critic in evaluation mode with dropout still on.
    `plain_layout` (bfloat16 networks for which `plain_layout_applies`) runs the feature-major pass
    beside the usual one so that every backward product is in plain layout; it needs the `kernels_t`
    collection. The output and its gradients are the same network's either way.
    """

    config: NetworkConfig

    @nn.compact
    def __call__(
        self, x: jax.Array, *, train: bool = False, dropout: bool = False, plain_layout: bool = False
    ) -> jax.Array:
        cfg = self.config
        if plain_layout:
            if not plain_layout_applies(cfg):
                raise ValueError(f"plain_layout needs a bfloat16 network, got {cfg}")
            return self._plain_layout(x, train, dropout)
        activation = ACTIVATIONS[cfg.activation]
        if cfg.batch_norm:
            x = self._batch_renorm(x, train)
        for i, width in enumerate(cfg.hidden):
            if cfg.precision == "bfloat16":
                x = PlainLayoutDense(width, name=f"Dense_{i}")(x)
            else:
                x = nn.Dense(width, name=f"Dense_{i}")(x)
            if cfg.dropout_rate > 0.0:
                x = Dropout(cfg.dropout_rate, name=f"Dropout_{i}")(x, deterministic=not dropout)
            if cfg.layer_norm:
                x = nn.LayerNorm()(x)
            x = activation(x)
            if cfg.batch_norm:
                x = self._batch_renorm(x, train)
        return x

    def _plain_layout(self, x: jax.Array, train: bool, dropout: bool) -> jax.Array:
        # The same layers, in the same order, with the same names (so the same parameters and dropout
        # masks), on the pair (x, x^T).
        cfg = self.config
        activation = ACTIVATIONS[cfg.activation]
        x_t = x.T  # the input's transpose is cheap (obs_dim + action_dim rows) and feeds only layer 0
        if cfg.batch_norm:
            x, x_t = self._batch_renorm(x, train, x_t)
        for i, width in enumerate(cfg.hidden):
            x, x_t = PlainLayoutDense(width, name=f"Dense_{i}")(x, x_t)
            if cfg.dropout_rate > 0.0:
                x, x_t = PairDropout(cfg.dropout_rate, name=f"Dropout_{i}")(x, x_t, deterministic=not dropout)
            if cfg.layer_norm:
                x, x_t = PairLayerNorm(name=f"LayerNorm_{i}")(x, x_t)
            x, x_t = activation(x), activation(x_t)
            if cfg.batch_norm:
                x, x_t = self._batch_renorm(x, train, x_t)
        return x

    @overload
    def _batch_renorm(self, x: jax.Array, train: bool, x_t: None = None) -> jax.Array: ...

    @overload
    def _batch_renorm(self, x: jax.Array, train: bool, x_t: jax.Array) -> tuple[jax.Array, jax.Array]: ...

    def _batch_renorm(
        self, x: jax.Array, train: bool, x_t: jax.Array | None = None
    ) -> jax.Array | tuple[jax.Array, jax.Array]:
        return BatchRenorm(momentum=self.config.batch_norm_momentum, warmup_steps=self.config.renorm_warmup_steps)(
            x, train, x_t
        )
