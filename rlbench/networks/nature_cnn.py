"""What a network reads its observation through: the flat observation itself (MlpPolicy) or SB3's NatureCNN
over an image (CnnPolicy), and the pixel scaling both apply to images.

NatureCNN (Mnih et al. 2015, SB3's features extractor of CnnPolicy): three convolutions, 32 filters 8x8
stride 4, 64 4x4 stride 2, 64 3x3 stride 1, unpadded, each with a ReLU, then a dense layer of `features_dim`
(512) with a ReLU. Images arrive flat and uint8 (rlbench.envs.images) and are scaled to [0, 1] first, as SB3's
`preprocess_obs` does for an image space under any policy; channels last (SB3 transposes to channels first
for torch, which changes no value).

The convolutions are computed as one matrix product of the image's patches (`PatchConv`), not XLA's
convolution: their gradient inside a `lax.scan` (the fused gradient steps, PPO's epochs) ran 10x slower on
XLA:CPU as a convolution than outside one, and as patches it runs at the speed of the unscanned convolution
(benchmarks/README.md). The values are the convolution's, to float32 rounding (tests/unit/test_images.py).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import flax.linen as nn
import jax
import jax.numpy as jnp

Extractor = Literal["flatten", "nature_cnn"]
# RL Zoo's / SBX's `policy` names for the value-based and on-policy learners, and the extractor each reads with.
POLICY_EXTRACTORS: dict[str, Extractor] = {"MlpPolicy": "flatten", "CnnPolicy": "nature_cnn"}
# Initialisation of the convolutions and the dense layer: flax's default (lecun normal weights, zero biases; SBX's),
# orthogonal with gain sqrt(2) and zero biases (SB3's ActorCriticPolicy with ortho_init), or PyTorch's default.
Init = Literal["lecun", "orthogonal", "torch"]
# (filters, kernel size, stride) of each convolution.
NATURE_CONVOLUTIONS = ((32, 8, 4), (64, 4, 2), (64, 3, 1))


@dataclass(frozen=True, kw_only=True)
class Features:
    """The extractor a policy name chooses, and NatureCNN's output width (SB3's features_extractor_kwargs)."""

    extractor: Extractor = "flatten"
    dim: int = 512

    def refusal(self, image_shape: tuple[int, ...], obs_dim: int) -> str | None:
        """Why these features cannot read an env's observations (image_shape () for a flat vector), or None."""
        if self.extractor == "flatten":
            return None
        if not image_shape:
            return (
                f"policy: CnnPolicy reads images (uint8 [height, width, channels] in [0, 255]); the env observes a "
                f"flat vector of {obs_dim} values: use MlpPolicy"
            )
        if min(conv_output_side(image_shape[0]), conv_output_side(image_shape[1])) < 1:
            return (
                f"policy: CnnPolicy's NatureCNN needs images of at least 36 x 36 pixels (three unpadded "
                f"convolutions: 8x8 stride 4, 4x4 stride 2, 3x3 stride 1), the env's are {list(image_shape)}"
            )
        return None


def policy_name(features: Features) -> str:
    """The `policy` value that reads with `features` (the inverse of POLICY_EXTRACTORS)."""
    return next(name for name, extractor in POLICY_EXTRACTORS.items() if extractor == features.extractor)


def scaled_pixels(obs: jax.Array) -> jax.Array:
    """Images (uint8, the only integer observations the loops pass) scaled to [0, 1]; float observations as they are."""
    return obs.astype(jnp.float32) / 255.0 if obs.dtype == jnp.uint8 else obs


def conv_output_side(side: int) -> int:
    """An image side after NatureCNN's three unpadded convolutions (0 or less: too small for them)."""
    for _, kernel, stride in NATURE_CONVOLUTIONS:
        side = (side - kernel) // stride + 1 if side >= kernel else 0
    return side


def nature_cnn_parameter_count(image_shape: tuple[int, ...], features_dim: int = 512) -> int:
    """Weights and biases of NatureCNN on [height, width, channels] images: each layer's fan-in x outputs + outputs."""
    height, width, channels = image_shape
    count = 0
    for filters, kernel, _ in NATURE_CONVOLUTIONS:
        count += kernel * kernel * channels * filters + filters
        channels = filters
    flat = conv_output_side(height) * conv_output_side(width) * channels
    return count + flat * features_dim + features_dim


def torch_default_uniform(fan_in: int) -> nn.initializers.Initializer:
    """PyTorch's nn.Linear and nn.Conv2d default for weights and biases: U(-1/sqrt(fan_in), 1/sqrt(fan_in))."""
    bound = 1.0 / math.sqrt(fan_in)

    def init(key: jax.Array, shape: tuple[int, ...], dtype: jnp.dtype = jnp.float32) -> jax.Array:
        return jax.random.uniform(key, shape, dtype, -bound, bound)

    return init


def _initializers(init: Init, fan_in: int) -> tuple[nn.initializers.Initializer, nn.initializers.Initializer]:
    if init == "orthogonal":
        return nn.initializers.orthogonal(math.sqrt(2.0)), nn.initializers.zeros_init()
    if init == "torch":  # PyTorch's Conv2d default is its Linear's
        return torch_default_uniform(fan_in), torch_default_uniform(fan_in)
    return nn.initializers.lecun_normal(), nn.initializers.zeros_init()


def image_patches(x: jax.Array, kernel: int, stride: int) -> jax.Array:
    """[..., H, W, C] -> [..., H', W', kernel * kernel * C]: each unpadded kernel x kernel window at `stride`,
    flattened in (row, column, channel) order, the order of a [kernel, kernel, C, F] kernel's rows."""
    out_h, out_w = (x.shape[-3] - kernel) // stride + 1, (x.shape[-2] - kernel) // stride + 1
    span_h, span_w = stride * (out_h - 1) + 1, stride * (out_w - 1) + 1
    windows = [
        x[..., row : row + span_h : stride, col : col + span_w : stride, :]
        for row in range(kernel)
        for col in range(kernel)
    ]
    return jnp.concatenate(windows, axis=-1)


class PatchConv(nn.Module):
    """An unpadded 2-D convolution (channels last) as the product of the image's patches with the kernel; the
    parameters are flax's nn.Conv's: kernel [kernel, kernel, C, features] and bias [features]."""

    features: int
    kernel: int
    stride: int
    kernel_init: nn.initializers.Initializer = nn.initializers.lecun_normal()
    bias_init: nn.initializers.Initializer = nn.initializers.zeros_init()

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        channels = x.shape[-1]
        weights = self.param("kernel", self.kernel_init, (self.kernel, self.kernel, channels, self.features))
        bias = self.param("bias", self.bias_init, (self.features,))
        patches = image_patches(x, self.kernel, self.stride)
        return patches @ weights.reshape(-1, self.features) + bias


class NatureCNN(nn.Module):
    """obs [..., height * width * channels] uint8 -> features [..., features_dim]."""

    image_shape: tuple[int, ...]
    features_dim: int = 512
    initialization: Init = "lecun"

    @nn.compact
    def __call__(self, obs: jax.Array) -> jax.Array:
        x = scaled_pixels(obs).reshape(*obs.shape[:-1], *self.image_shape)
        for index, (filters, kernel, stride) in enumerate(NATURE_CONVOLUTIONS):
            kernel_init, bias_init = _initializers(self.initialization, kernel * kernel * x.shape[-1])
            # Named as flax's nn.Conv layers would be (SBX's NatureCNN too): the same parameters, the same tree.
            x = nn.relu(PatchConv(filters, kernel, stride, kernel_init, bias_init, name=f"Conv_{index}")(x))
        x = x.reshape(*x.shape[:-3], -1)
        kernel_init, bias_init = _initializers(self.initialization, x.shape[-1])
        return nn.relu(nn.Dense(self.features_dim, kernel_init=kernel_init, bias_init=bias_init)(x))


def extract(features: Features, image_shape: tuple[int, ...], obs: jax.Array, init: Init = "lecun") -> jax.Array:
    """The features a network's layers read (call inside a parent's compact method): NatureCNN's, or the
    observation itself with images scaled."""
    if features.extractor == "nature_cnn":
        return NatureCNN(image_shape, features.dim, init, name="features")(obs)
    return scaled_pixels(obs)


def features_units(features: Features, image_shape: tuple[int, ...]) -> int:
    """Values NatureCNN keeps per batch row (the memory estimate): the scaled input, each convolution's output and
    the dense layer's; for the flat extractor, the scaled input."""
    if features.extractor == "flatten" or not image_shape:
        return math.prod(image_shape) if image_shape else 0
    height, width, _ = image_shape
    units = math.prod(image_shape) + features.dim
    for filters, kernel, stride in NATURE_CONVOLUTIONS:
        height, width = (height - kernel) // stride + 1, (width - kernel) // stride + 1
        units += height * width * filters
    return units
