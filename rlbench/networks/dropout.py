"""Dropout with masks from XLA's Threefry bit generator: `nn.Dropout`'s semantics, a third of its cost on CPU.

DroQ draws a fresh mask for every hidden unit of both critics twice per gradient step (online and
target critic), 20 gradient steps per env step. `nn.Dropout` draws them with `jax.random.bernoulli`, whose
Threefry-2x32 JAX builds from elementwise integer ops; on XLA:CPU one [2, 256, 256] mask costs about
1 ms there, so the four masks of a DroQ critic step cost more than its matrix products
(benchmarks/README.md). XLA's own RngBitGenerator with the same generator family (Threefry, Random123)
draws the same mask in about a third of the time, and the whole DroQ update runs about 1.5x faster.

`lax.rng_bit_generator` is the primitive under `jax.random`'s "rbg" implementations; JAX marks direct
use experimental because its bits may differ between backends and XLA versions. Here that is harmless:
a run's masks are still a pure function of its seed on one machine (determinism is tested), and no
saved artefact depends on which masks were drawn.
"""

from __future__ import annotations

from collections.abc import Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp

_BITS = 2**32


def keep_mask(key: jax.Array, rate: float, shape: Sequence[int]) -> jax.Array:
    """Boolean mask of `shape`, each entry False (dropped) with probability `rate` (to within 2^-32)."""
    if not 0.0 <= rate < 1.0:
        raise ValueError(f"dropout rate must be in [0, 1), got {rate}")
    state = jax.random.bits(key, (4,), jnp.uint32)  # the generator's 128-bit state, from the layer's key
    bits = threefry_bits(state, tuple(shape))
    # Uniform 32-bit words: P(bits < t) = t / 2^32, so dropping below round(rate * 2^32) drops at `rate`.
    threshold: jax.Array = jnp.uint32(min(round(rate * _BITS), _BITS - 1))
    return bits >= threshold


def threefry_bits(state: jax.Array, shape: tuple[int, ...]) -> jax.Array:
    """Uniform uint32 words of `shape` from XLA's Threefry generator seeded with `state` (uint32 [4]).

    Under `jax.vmap` each state draws its own words, exactly those it draws unbatched. JAX's batching
    rule for `rng_bit_generator` would draw the whole batch from the first state instead: the members of
    the critic ensemble and the seeds of a vmapped multi-seed update would share one stream, and seed i
    of K would not train as a single run with its own seed does. The states are looped over instead.
    """

    @jax.custom_batching.custom_vmap
    def draw(state: jax.Array) -> jax.Array:
        # jax leaves lax.rng_bit_generator unannotated; it returns (the next state, the words).
        words: jax.Array = jax.lax.rng_bit_generator(
            state, shape, dtype=jnp.uint32, algorithm=jax.lax.RandomAlgorithm.RNG_THREE_FRY
        )[1]
        return words

    @draw.def_vmap
    def draw_per_state(axis_size: int, in_batched: list[bool], states: jax.Array) -> tuple[jax.Array, bool]:
        return jax.lax.map(draw, states), True

    bits: jax.Array = draw(state)
    return bits


def apply_mask(x: jax.Array, keep: jax.Array, rate: float) -> jax.Array:
    """Inverted dropout: kept units scaled by 1 / (1 - rate), so the expected output is x."""
    return jax.lax.select(keep, x / (1.0 - rate), jnp.zeros_like(x))


class Dropout(nn.Module):
    """`nn.Dropout(rate)` with `keep_mask` masks; reads the "dropout" PRNG stream when not deterministic."""

    rate: float

    @nn.compact
    def __call__(self, x: jax.Array, deterministic: bool) -> jax.Array:
        if deterministic or self.rate == 0.0:
            return x
        return apply_mask(x, keep_mask(self.make_rng("dropout"), self.rate, x.shape), self.rate)
