"""Mixed precision: bfloat16 products with float32 accumulation; everything else stays float32."""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from rlbench.networks.mlp import MLP, NetworkConfig, bfloat16_dot_general


def test_bfloat16_dot_rounds_operands_and_accumulates_in_float32():
    # 1 + 2**-10 is not a bfloat16 (8 bits of mantissa): it rounds to 1. The 512 products of 1 * 1 sum
    # to 512 exactly in float32; a bfloat16 accumulator would stall at 256 (256 + 1 rounds to 256).
    x = jnp.full((1, 512), 1 + 2**-10, jnp.float32)
    w = jnp.ones((512, 1), jnp.float32)
    out = bfloat16_dot_general(x, w, (((1,), (0,)), ((), ())))
    assert out.dtype == jnp.float32
    assert float(out[0, 0]) == 512.0
    assert float(jax.lax.dot_general(x, w, (((1,), (0,)), ((), ())))[0, 0]) == pytest.approx(512.5)


@pytest.mark.parametrize("batch_norm", [False, True])
def test_bfloat16_network_keeps_float32_parameters_and_statistics_and_stays_close(batch_norm):
    cfg32 = NetworkConfig(hidden=(64, 64), batch_norm=batch_norm, layer_norm=not batch_norm)
    cfg16 = NetworkConfig(hidden=(64, 64), batch_norm=batch_norm, layer_norm=not batch_norm, precision="bfloat16")
    x = jax.random.normal(jax.random.key(0), (32, 10))
    variables = MLP(cfg32).init(jax.random.key(1), x)
    floating = [leaf for leaf in jax.tree.leaves(variables) if jnp.issubdtype(leaf.dtype, jnp.floating)]
    assert all(leaf.dtype == jnp.float32 for leaf in floating)  # the same parameters serve both precisions

    def loss(params, cfg):
        out, updates = MLP(cfg).apply({**variables, "params": params}, x, train=True, mutable=["batch_stats"])
        return jnp.mean(out**2), (out, updates)

    (_, (out32, _)), g32 = jax.value_and_grad(loss, has_aux=True)(variables["params"], cfg32)
    (l16, (out16, up16)), g16 = jax.value_and_grad(loss, has_aux=True)(variables["params"], cfg16)
    assert out16.dtype == jnp.float32 and l16.dtype == jnp.float32
    assert all(leaf.dtype == jnp.float32 for leaf in jax.tree.leaves((g16, up16)) if leaf.dtype != jnp.int32)
    # bfloat16 keeps 8 bits of mantissa: relative errors of a few 1e-3 per product, not more.
    np.testing.assert_allclose(out16, out32, rtol=0.05, atol=0.02)
    # Gradients within a few % of float32 (as a whole: a bias feeding BatchRenorm has a true gradient of
    # about zero, so its own relative error means nothing).
    error = optax.tree.norm(jax.tree.map(jnp.subtract, g16, g32))
    assert float(error) <= 0.03 * float(optax.tree.norm(g32))
    assert not np.array_equal(out16, out32)  # the bfloat16 path really rounds
