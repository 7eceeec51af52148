"""Batch Renormalization (Ioffe 2017, arXiv:1702.03275) as CrossQ uses it (Bhatt et al., ICLR 2024).

Training mode, per feature, with batch mean m_b and variance v_b, running mean m_r and variance v_r,
std_b = sqrt(v_b + eps), std_r = sqrt(v_r + eps):
    r = stop_gradient(clip(std_b / std_r, 1 / r_max, r_max))
    d = stop_gradient(clip((m_b - m_r) / std_r, -d_max, d_max))
    after warm-up:  normalise with mean m_b - d * sqrt(v_b) / r and variance v_b / r^2
                    (= normalise with the batch statistics, then multiply by r and add d);
    during warm-up: plain BatchNorm with (m_b, v_b).
    m_r <- momentum * m_r + (1 - momentum) * m_b, same for v_r; `steps` counts training-mode calls.
    Where v_b is exactly 0 (a feature constant over the batch), sqrt(v_b) gets gradient 0, not sqrt's
    infinite one, which made the gradients below the layer NaN.
Evaluation mode normalises with (m_r, v_r). Scale and bias follow, as in BatchNorm.

The warm-up is a hard switch after `warmup_steps` training-mode calls of this layer (the paper
relaxes r_max and d_max gradually instead); it lets the running statistics settle before they are
used. A critic layer is called in training mode once per gradient step; an actor layer once per
actor update, so with policy_delay k the actor's warm-up lasts k times more gradient steps.
"""

from __future__ import annotations

from typing import overload

import flax.linen as nn
import jax
import jax.numpy as jnp


def sqrt_or_zero_gradient(v: jax.Array) -> jax.Array:
    """sqrt(v) for v >= 0, with gradient 0 where v is 0 instead of sqrt's infinite one. A feature constant
    over the batch (a constant observation, a unit off for every sample) has batch variance exactly 0;
    there, plain sqrt's infinite derivative times the zero cotangent of `jnp.where`'s other branch (during
    warm-up) or times d is NaN or inf, and it reaches the parameters below the layer."""
    positive = v > 0
    return jnp.where(positive, jnp.sqrt(jnp.where(positive, v, 1.0)), 0.0)


class BatchRenorm(nn.Module):
    momentum: float = 0.99
    epsilon: float = 1e-3
    r_max: float = 3.0
    d_max: float = 5.0
    warmup_steps: int = 100_000

    @overload
    def __call__(self, x: jax.Array, train: bool, x_t: None = None) -> jax.Array: ...

    @overload
    def __call__(self, x: jax.Array, train: bool, x_t: jax.Array) -> tuple[jax.Array, jax.Array]: ...

    @nn.compact
    def __call__(
        self, x: jax.Array, train: bool, x_t: jax.Array | None = None
    ) -> jax.Array | tuple[jax.Array, jax.Array]:
        """Normalised x [B, features]; with x_t = x^T [features, B] (plain-layout networks), the pair
        (y, y^T): the feature-major copy gets the same per-feature map, from x's statistics."""
        features = x.shape[-1]
        running_mean = self.variable("batch_stats", "mean", jnp.zeros, (features,), jnp.float32)
        running_var = self.variable("batch_stats", "var", jnp.ones, (features,), jnp.float32)
        steps = self.variable("batch_stats", "steps", jnp.zeros, (), jnp.int32)
        scale = self.param("scale", nn.initializers.ones, (features,), jnp.float32)
        bias = self.param("bias", nn.initializers.zeros, (features,), jnp.float32)

        if train:
            batch_axes = tuple(range(x.ndim - 1))
            # One pass for both moments (E[x^2] - E[x]^2, as Flax's fast variance), clamped at 0.
            batch_mean = x.mean(axis=batch_axes)
            batch_var = jnp.maximum((x * x).mean(axis=batch_axes) - batch_mean**2, 0.0)
            std_batch = jnp.sqrt(batch_var + self.epsilon)
            std_running = jnp.sqrt(running_var.value + self.epsilon)
            r = jax.lax.stop_gradient(jnp.clip(std_batch / std_running, 1.0 / self.r_max, self.r_max))
            d = jax.lax.stop_gradient(
                jnp.clip((batch_mean - running_mean.value) / std_running, -self.d_max, self.d_max)
            )
            warmed_up = steps.value >= self.warmup_steps
            mean = jnp.where(warmed_up, batch_mean - d * sqrt_or_zero_gradient(batch_var) / r, batch_mean)
            var = jnp.where(warmed_up, batch_var / r**2, batch_var)
            if not self.is_initializing():
                m = self.momentum
                running_mean.value = m * running_mean.value + (1.0 - m) * jax.lax.stop_gradient(batch_mean)
                running_var.value = m * running_var.value + (1.0 - m) * jax.lax.stop_gradient(batch_var)
                steps.value = steps.value + 1
        else:
            mean, var = running_mean.value, running_var.value
        # One per-feature affine map: x * multiplier + offset.
        multiplier = jax.lax.rsqrt(var + self.epsilon) * scale
        offset = bias - mean * multiplier
        if x_t is None:
            return x * multiplier + offset
        return x * multiplier + offset, x_t * multiplier[:, None] + offset[:, None]
