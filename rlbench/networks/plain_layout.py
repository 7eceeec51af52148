"""bfloat16 Dense layers whose backward products run in plain layout, the only fast one on XLA:CPU.

A Dense layer y = x W computes three products per training step: x @ W (forward), dy @ W^T (input
gradient) and x^T @ dy (kernel gradient). XLA:CPU multiplies bfloat16 fast (about 2-4x float32 on
AVX-512-BF16/AMX) only when the left operand is contracted on its last axis and the right one on its
first, both row-major. Autodiff gives the two backward products a transposed operand, which XLA folds
into the product's dimension numbers; that form runs as a float32 product on upcast copies, slower
than plain float32 (benchmarks/README.md). An explicit `.T` does not help: XLA folds it back.

So the backward products get operands that are already laid out:
- W^T comes from the *previous* gradient step: after every optimizer step the update stores
  `transposed_kernels(params)` (bfloat16 [out, in] copies) in the train state, so inside the compiled
  loop it crosses the loop boundary as data and cannot be folded. It is exactly W^T of the current
  parameters: the refresh follows every change of the parameters (tested).
- x^T comes from a second, feature-major forward pass, y^T = W^T x^T, run beside the usual one. The
  dropout, normalisation and activation of each layer act on both (same mask, same statistics). It costs one
  more forward product per layer (a third more work), in the fast layout.
The backward pass is then dx = dy @ W^T ([B, out] @ [out, in]) and dW = x^T @ dy ([in, B] @ [B, out]),
both plain. The feature-major values serve only as operands: their cotangent is zero by construction
(the loss reads the batch-major output only), so gradients are those of the batch-major network.
"""

from __future__ import annotations

from typing import overload

import flax.linen as nn
import jax
import jax.numpy as jnp
from flax import traverse_util
from jax.nn.initializers import Initializer

from rlbench.networks.dropout import apply_mask, keep_mask
from rlbench.types import Params

KERNELS_T = "kernels_t"  # the Flax collection holding W^T per plain-layout Dense layer


def _matmul(a: jax.Array, b: jax.Array) -> jax.Array:
    """a @ b on bfloat16 operands with a float32 result."""
    return jnp.matmul(a.astype(jnp.bfloat16), b.astype(jnp.bfloat16), preferred_element_type=jnp.float32)


@jax.custom_vjp
def dense_pair(
    x: jax.Array, x_t: jax.Array, kernel: jax.Array, kernel_t: jax.Array, bias: jax.Array
) -> tuple[jax.Array, jax.Array]:
    """(x W + b, W^T x^T + b) for x [B, in] and x_t = x^T [in, B] (float32 activations), kernel [in, out]
    (float32 parameter) and kernel_t = W^T [out, in] (its bfloat16 copy from `transposed_kernels`)."""
    return _matmul(x, kernel) + bias, _matmul(kernel_t, x_t) + bias[:, None]


# What the backward pass keeps: x^T (bfloat16) and W^T.
Residuals = tuple[jax.Array, jax.Array]


def _dense_pair_forward(
    x: jax.Array, x_t: jax.Array, kernel: jax.Array, kernel_t: jax.Array, bias: jax.Array
) -> tuple[tuple[jax.Array, jax.Array], Residuals]:
    x_t16 = x_t.astype(jnp.bfloat16)
    outputs = _matmul(x, kernel) + bias, _matmul(kernel_t, x_t16) + bias[:, None]
    return outputs, (x_t16, kernel_t)


def _dense_pair_backward(
    residuals: Residuals, cotangents: tuple[jax.Array, jax.Array]
) -> tuple[jax.Array, jax.Array, jax.Array, jax.Array, jax.Array]:
    x_t16, kernel_t = residuals
    dy, _ = cotangents  # the feature-major output is an operand only: its cotangent is zero
    dy16 = dy.astype(jnp.bfloat16)
    dx = jnp.matmul(dy16, kernel_t, preferred_element_type=jnp.float32)  # [B, out] @ [out, in]
    dkernel = jnp.matmul(x_t16, dy16, preferred_element_type=jnp.float32)  # [in, B] @ [B, out]
    # x_t and kernel_t are operands only, never differentiated: zero cotangents (dead code once compiled).
    return dx, jnp.zeros(x_t16.shape, jnp.float32), dkernel, jnp.zeros_like(kernel_t), dy.sum(axis=0)


dense_pair.defvjp(_dense_pair_forward, _dense_pair_backward)


class PlainLayoutDense(nn.Module):
    """A Dense layer with bfloat16 products (float32 accumulation) and the same parameters as `nn.Dense`.

    `layer(x)`: y = x W + b. `layer(x, x_t)`: the pair (y, y^T) through `dense_pair`, reading W^T from
    the `kernels_t` collection (see `transposed_kernels`).
    """

    features: int
    kernel_init: Initializer = nn.initializers.lecun_normal()  # as nn.Dense's (SimBa's blocks: He normal)

    @overload
    def __call__(self, x: jax.Array, x_t: None = None) -> jax.Array: ...

    @overload
    def __call__(self, x: jax.Array, x_t: jax.Array) -> tuple[jax.Array, jax.Array]: ...

    @nn.compact
    def __call__(self, x: jax.Array, x_t: jax.Array | None = None) -> jax.Array | tuple[jax.Array, jax.Array]:
        kernel = self.param("kernel", self.kernel_init, (x.shape[-1], self.features), jnp.float32)
        bias = self.param("bias", nn.initializers.zeros_init(), (self.features,), jnp.float32)
        if x_t is None:
            return _matmul(x, kernel) + bias
        if not self.has_variable(KERNELS_T, "kernel"):
            raise ValueError(
                f"{self.name}: the plain-layout pass needs W^T in the '{KERNELS_T}' collection "
                "(apply with {'kernels_t': transposed_kernels(params), ...})"
            )
        return dense_pair(x, x_t, kernel, self.get_variable(KERNELS_T, "kernel"), bias)


class PairDropout(nn.Module):
    """`Dropout` on (x, x^T) with one mask; under the same name it draws the same mask as `Dropout`."""

    rate: float

    @nn.compact
    def __call__(self, x: jax.Array, x_t: jax.Array, deterministic: bool) -> tuple[jax.Array, jax.Array]:
        if deterministic or self.rate == 0.0:
            return x, x_t
        keep = keep_mask(self.make_rng("dropout"), self.rate, x.shape)
        return apply_mask(x, keep, self.rate), apply_mask(x_t, keep.T, self.rate)


class PairLayerNorm(nn.Module):
    """`nn.LayerNorm` (same parameters, same arithmetic) on x [B, features], and the same per-sample
    normalisation applied to x^T [features, B]."""

    epsilon: float = 1e-6

    @nn.compact
    def __call__(self, x: jax.Array, x_t: jax.Array) -> tuple[jax.Array, jax.Array]:
        features = x.shape[-1]
        scale = self.param("scale", nn.initializers.ones_init(), (features,), jnp.float32)
        bias = self.param("bias", nn.initializers.zeros_init(), (features,), jnp.float32)
        # As Flax: one pass for both moments, the variance clamped at 0.
        mean = x.mean(axis=-1, keepdims=True)
        var = jnp.maximum((x * x).mean(axis=-1, keepdims=True) - mean**2, 0.0)
        inv_std = jax.lax.rsqrt(var + self.epsilon)
        y = (x - mean) * (inv_std * scale) + bias
        y_t = (x_t - mean.T) * inv_std.T * scale[:, None] + bias[:, None]
        return y, y_t


def transposed_kernels(params: Params) -> Params:
    """The `kernels_t` collection for `params`: W^T in bfloat16 for every PlainLayoutDense kernel (those
    of the MLP trunks), under the same module path; leading (ensemble) axes kept."""
    # flax leaves traverse_util's flatten_dict and unflatten_dict unannotated.
    flat: dict[tuple[str, ...], jax.Array] = traverse_util.flatten_dict(params)
    kernels_t: Params = traverse_util.unflatten_dict(
        {
            path: jnp.swapaxes(value, -1, -2).astype(jnp.bfloat16)
            for path, value in flat.items()
            if path[-1] == "kernel" and "trunk" in path
        }
    )
    return kernels_t
