"""SimBa's trunk (Lee et al., ICLR 2025, "SimBa: Simplicity Bias for Scaling Up Parameters in Deep RL"),
as SBX 0.28's SimbaPolicy builds it for SAC, TQC and CrossQ.

    x = Dense(w)(input)                                    (w = net_arch[0]; Flax's default init)
    per entry of net_arch: x = x + Dense(w)(act(Dense(4w)(Norm(x))))   (pre-normalised residual block,
                           an inverted bottleneck 4 times wider; He-normal kernels)  [then Dropout]
    x = Norm(x)                                            (the final normalisation the heads read)

Norm is LayerNorm. With `batch_norm` (CrossQ) it is BatchRenorm instead, which also normalises the input
first, as SBX's SimbaCrossQPolicy. `layer_norm` changes nothing here: the blocks always normalise (SBX
ignores it too). Dropout (DroQ) follows each block, as SBX. The residual path keeps one width, so every
entry of net_arch is the same width (checked where the config is read).

Parameters, input dim d, width w, n blocks: d w + w (input) + n (8 w^2 + 7 w) (blocks: LayerNorm 2w,
w -> 4w, 4w -> w) + 2 w (final LayerNorm); BatchRenorm adds 2 d for the input's scale and bias.

bfloat16 (`precision`): every Dense is a PlainLayoutDense and, with `plain_layout`, the feature-major pass
runs beside the batch-major one through the normalisations, the activation and the residual sums, as
the MLP's (networks/plain_layout.py).
"""

from __future__ import annotations

import flax.linen as nn
import jax
from jax.nn.initializers import Initializer

from rlbench.networks.batch_renorm import BatchRenorm
from rlbench.networks.dropout import Dropout
from rlbench.networks.mlp import ACTIVATIONS, NetworkConfig, plain_layout_applies
from rlbench.networks.plain_layout import PairDropout, PairLayerNorm, PlainLayoutDense

SIMBA_EXPANSION = 4  # the block's hidden width over its residual width (SBX's scale_factor, not a policy_kwarg)
HE_NORMAL = nn.initializers.he_normal()
LECUN_NORMAL = nn.initializers.lecun_normal()

# A value and, in the plain-layout pass, its feature-major copy (None otherwise).
Pair = tuple[jax.Array, jax.Array | None]


def dense(cfg: NetworkConfig, features: int, name: str, x: jax.Array, x_t: jax.Array | None, init: Initializer) -> Pair:
    if cfg.precision == "bfloat16":
        layer = PlainLayoutDense(features, init, name=name)
        return (layer(x), None) if x_t is None else layer(x, x_t)
    return nn.Dense(features, kernel_init=init, name=name)(x), None


def normalize(cfg: NetworkConfig, name: str, x: jax.Array, x_t: jax.Array | None, train: bool) -> Pair:
    if cfg.batch_norm:
        layer = BatchRenorm(momentum=cfg.batch_norm_momentum, warmup_steps=cfg.renorm_warmup_steps, name=name)
        return (layer(x, train), None) if x_t is None else layer(x, train, x_t)
    if x_t is None:
        return nn.LayerNorm(name=name)(x), None
    return PairLayerNorm(name=name)(x, x_t)


def apply_dropout(cfg: NetworkConfig, name: str, x: jax.Array, x_t: jax.Array | None, on: bool) -> Pair:
    if cfg.dropout_rate == 0.0:
        return x, x_t
    if x_t is None:
        return Dropout(cfg.dropout_rate, name=name)(x, deterministic=not on), None
    return PairDropout(cfg.dropout_rate, name=name)(x, x_t, deterministic=not on)


class SimbaBlock(nn.Module):
    """x + Dense(width)(act(Dense(4 width)(Norm(x)))), on (x, x^T) in the plain-layout pass."""

    width: int
    config: NetworkConfig

    @nn.compact
    def __call__(self, x: jax.Array, x_t: jax.Array | None, train: bool) -> Pair:
        activation = ACTIVATIONS[self.config.activation]
        y, y_t = normalize(self.config, "Norm", x, x_t, train)
        y, y_t = dense(self.config, self.width * SIMBA_EXPANSION, "Dense_0", y, y_t, HE_NORMAL)
        y, y_t = activation(y), None if y_t is None else activation(y_t)
        y, y_t = dense(self.config, self.width, "Dense_1", y, y_t, HE_NORMAL)
        if x_t is None:
            return x + y, None
        assert y_t is not None, "the feature-major copy goes through every layer with x^T"
        return x + y, x_t + y_t


class SimbaTrunk(nn.Module):
    """The trunk of a `family: simba` network; called as `MLP` is (same flags, same collections)."""

    config: NetworkConfig

    @nn.compact
    def __call__(
        self, x: jax.Array, *, train: bool = False, dropout: bool = False, plain_layout: bool = False
    ) -> jax.Array:
        cfg = self.config
        if plain_layout and not plain_layout_applies(cfg):
            raise ValueError(f"plain_layout needs a bfloat16 network, got {cfg}")
        x_t = x.T if plain_layout else None
        if cfg.batch_norm:
            x, x_t = normalize(cfg, "Norm_input", x, x_t, train)
        x, x_t = dense(cfg, cfg.hidden[0], "Dense_input", x, x_t, LECUN_NORMAL)
        for i, width in enumerate(cfg.hidden):
            x, x_t = SimbaBlock(width, cfg, name=f"Block_{i}")(x, x_t, train)
            x, x_t = apply_dropout(cfg, f"Dropout_{i}", x, x_t, dropout)
        x, _ = normalize(cfg, "Norm_output", x, x_t, train)
        return x
