"""Dropout masks from XLA's Threefry bit generator (networks/dropout.py): rate, independence, determinism."""

from __future__ import annotations

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from rlbench.networks.dropout import Dropout, keep_mask


@pytest.mark.parametrize("rate", [0.01, 0.2, 0.5])
def test_masks_drop_at_the_requested_rate(rate):
    n = 2**20
    dropped = 1.0 - float(jnp.mean(keep_mask(jax.random.key(0), rate, (n,))))
    sigma = np.sqrt(rate * (1 - rate) / n)
    assert abs(dropped - rate) < 5 * sigma, (dropped, rate)


def test_masks_repeat_per_key_and_differ_across_keys_and_positions():
    mask = keep_mask(jax.random.key(0), 0.5, (256, 256))
    np.testing.assert_array_equal(mask, keep_mask(jax.random.key(0), 0.5, (256, 256)))
    other = keep_mask(jax.random.key(1), 0.5, (256, 256))
    assert 0.45 < float(jnp.mean(mask != other)) < 0.55  # independent masks disagree half the time
    # No structure along either axis: neighbouring rows and columns are as unrelated as two keys' masks.
    assert 0.45 < float(jnp.mean(mask[1:] != mask[:-1])) < 0.55
    assert 0.45 < float(jnp.mean(mask[:, 1:] != mask[:, :-1])) < 0.55
    assert bool(jnp.all(keep_mask(jax.random.key(0), 0.0, (1000,))))


def test_rate_outside_zero_one_is_refused():
    with pytest.raises(ValueError, match=r"\[0, 1\)"):
        keep_mask(jax.random.key(0), 1.0, (4,))


def test_dropout_scales_kept_units_and_is_the_identity_when_deterministic():
    x = jnp.arange(1.0, 1001.0)
    layer = Dropout(0.2)
    np.testing.assert_array_equal(layer.apply({}, x, deterministic=True), x)
    y = layer.apply({}, x, deterministic=False, rngs={"dropout": jax.random.key(3)})
    kept = y != 0
    np.testing.assert_allclose(y[kept], x[kept] / 0.8, rtol=1e-6)
    assert 0.15 < 1.0 - float(kept.mean()) < 0.25


def test_ensemble_members_draw_different_masks():
    """Under `nn.vmap` with split dropout streams (the critic ensemble), each member has its own mask."""

    class Members(nn.Module):
        @nn.compact
        def __call__(self, x):
            return nn.vmap(Dropout, variable_axes={}, split_rngs={"dropout": True}, in_axes=None, axis_size=2)(0.5)(
                x, False
            )

    out = Members().apply({}, jnp.ones((64, 64)), rngs={"dropout": jax.random.key(0)})
    assert out.shape == (2, 64, 64)
    assert 0.45 < float(jnp.mean((out[0] == 0) != (out[1] == 0))) < 0.55


def test_each_key_draws_its_own_mask_under_nested_vmap():
    """Seeds (outer vmap) of ensemble members (inner vmap): every key draws the mask it draws alone.
    JAX's own batching of `rng_bit_generator` drew the whole batch from the first key."""
    keys = jax.random.split(jax.random.key(0), (3, 2))

    def draw(key):
        return keep_mask(key, 0.5, (16, 16))

    masks = jax.jit(jax.vmap(jax.vmap(draw)))(keys)
    for seed in range(3):
        for member in range(2):
            np.testing.assert_array_equal(masks[seed, member], draw(keys[seed, member]))
