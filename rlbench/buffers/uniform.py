"""A fixed-capacity ring buffer of transitions, kept on the JAX device and sampled uniformly.

All functions are pure and jittable, so one compiled training call inserts the newly collected
transitions and samples every gradient step's batch without a host round trip.

Storage is one float32 matrix with a row per transition, [obs | next_obs | action | reward |
terminated]. One row array means one gather per batch and one in-place write per insert. (With
a column per field, XLA:CPU copied whole same-shaped columns, 40 ms a call at 1M transitions, when
the insert and the gather of two such columns shared a compiled call.) Image observations
(`EnvSpec.image_shape`) keep their uint8 in a second matrix, `pixels` [obs | next_obs], a quarter of
float32's bytes (Atari's 84x84x4 frames: 56 KiB per transition instead of 220); the float rows then hold
[action | reward | terminated] and `pixels` is [capacity, 0] for every other observation.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import numpy.typing as npt
from flax import struct

from rlbench.types import EnvSpec, Transition


class BufferState(struct.PyTreeNode):
    rows: jax.Array  # [capacity, row_width(spec)] float32
    pixels: jax.Array  # [capacity, pixel_width(spec)] uint8: an image's obs and next_obs, else no columns
    position: jax.Array  # int32, next row to write
    size: jax.Array  # int32, rows filled so far (<= capacity)


def pixel_width(spec: EnvSpec) -> int:
    return 2 * spec.obs_dim if spec.image_shape else 0


def row_width(spec: EnvSpec) -> int:
    return 2 * spec.obs_dim + spec.action_dim + 2 - pixel_width(spec)


def bytes_per_transition(spec: EnvSpec) -> int:
    return 4 * row_width(spec) + pixel_width(spec)


def pack(transitions: Transition, spec: EnvSpec) -> tuple[jax.Array, jax.Array]:
    """[n, ...] fields -> ([n, row_width] float32 rows, [n, pixel_width] uint8 pixels)."""
    observations = [transitions.obs, transitions.next_obs]
    rest = [transitions.action, transitions.reward[:, None], transitions.terminated[:, None]]
    if spec.image_shape:
        return jnp.concatenate(rest, axis=1, dtype=jnp.float32), jnp.concatenate(observations, axis=1, dtype=jnp.uint8)
    no_pixels = jnp.zeros((transitions.reward.shape[0], 0), jnp.uint8)
    return jnp.concatenate([*observations, *rest], axis=1, dtype=jnp.float32), no_pixels


def unpack(rows: jax.Array, spec: EnvSpec, pixels: jax.Array | None = None) -> Transition:
    """[n, row_width] rows and, for images, [n, pixel_width] pixels -> Transition of [n, ...] fields (images as
    uint8)."""
    o, a = spec.obs_dim, spec.action_dim
    observations = rows
    if spec.image_shape:
        if pixels is None:
            raise ValueError("unpack: image transitions need their pixels")
        observations = pixels
    rest = rows if spec.image_shape else rows[:, 2 * o :]
    return Transition(
        obs=observations[:, :o],
        next_obs=observations[:, o : 2 * o],
        action=rest[:, :a],
        reward=rest[:, a],
        terminated=rest[:, a + 1],
    )


@dataclass(frozen=True)
class UniformBuffer:
    capacity: int
    spec: EnvSpec
    init_fn: Callable[[], BufferState]
    add_fn: Callable[[BufferState, Transition], BufferState]
    # (state, transitions [n], valid [n] bool): the valid rows only, in order, as if they were added alone
    add_valid_fn: Callable[[BufferState, Transition, jax.Array], BufferState]
    sample_fn: Callable[[BufferState, jax.Array, int], Transition]


def make_uniform_buffer(capacity: int, spec: EnvSpec) -> UniformBuffer:
    """Ring buffer of `capacity` transitions: once full, the oldest rows are overwritten first."""
    if capacity < 1:
        raise ValueError(f"buffer capacity must be >= 1, got {capacity}")

    def init() -> BufferState:
        # Distinct arrays for position and size: one buffer in two leaves cannot be donated.
        return BufferState(
            rows=jnp.zeros((capacity, row_width(spec)), jnp.float32),
            pixels=jnp.zeros((capacity, pixel_width(spec)), jnp.uint8),
            position=jnp.zeros((), jnp.int32),
            size=jnp.zeros((), jnp.int32),
        )

    def add(state: BufferState, transitions: Transition) -> BufferState:
        n = transitions.reward.shape[0]  # static under jit
        if n > capacity:
            raise ValueError(f"cannot add {n} transitions at once to a buffer of {capacity}")
        targets = (state.position + jnp.arange(n)) % capacity  # wraps around the end
        rows, pixels = pack(transitions, spec)
        return BufferState(
            rows=state.rows.at[targets].set(rows),
            pixels=state.pixels.at[targets].set(pixels),
            position=(state.position + n) % capacity,
            size=jnp.minimum(state.size + n, capacity),
        )

    def add_valid(state: BufferState, transitions: Transition, valid: jax.Array) -> BufferState:
        n = transitions.reward.shape[0]
        if n > capacity:
            raise ValueError(f"cannot add {n} transitions at once to a buffer of {capacity}")
        count = valid.sum(dtype=jnp.int32)
        slots = (state.position + jnp.cumsum(valid, dtype=jnp.int32) - 1) % capacity
        targets = jnp.where(valid, slots, capacity)  # capacity: out of range, dropped
        rows, pixels = pack(transitions, spec)
        return BufferState(
            rows=state.rows.at[targets].set(rows, mode="drop"),
            pixels=state.pixels.at[targets].set(pixels, mode="drop"),
            position=(state.position + count) % capacity,
            size=jnp.minimum(state.size + count, capacity),
        )

    def sample(state: BufferState, key: jax.Array, n: int) -> Transition:
        picked = jax.random.randint(key, (n,), 0, jnp.maximum(state.size, 1))
        return unpack(state.rows[picked], spec, state.pixels[picked])

    return UniformBuffer(
        capacity=capacity, spec=spec, init_fn=init, add_fn=add, add_valid_fn=add_valid, sample_fn=sample
    )


# A checkpoint's replay_buffer/ members by name: float32 rows, uint8 pixels (images only), an integer position
# and capacity.
BufferArrays = Mapping[str, npt.NDArray[Any]]


def buffer_to_arrays(state: BufferState) -> dict[str, npt.NDArray[Any]]:
    """The filled rows and the ring position, for a checkpoint (empty rows are not saved)."""
    size = int(state.size)
    arrays = {
        "rows": np.asarray(state.rows[:size]),
        "position": np.asarray(state.position),
        "capacity": np.asarray(state.rows.shape[0], np.int64),
    }
    if state.pixels.shape[-1]:
        arrays["pixels"] = np.asarray(state.pixels[:size])
    return arrays


def check_buffer_arrays(capacity: int, spec: EnvSpec, arrays: BufferArrays) -> None:
    """Raise ValueError, naming the checkpoint member and the shape it needs, when saved buffer arrays do
    not fit a buffer of `capacity` transitions for `spec`."""
    rows, width = arrays["rows"], row_width(spec)
    if int(arrays["capacity"]) != capacity:
        raise ValueError(
            f"replay buffer size mismatch: saved buffer_size={int(arrays['capacity'])}, "
            f"configured buffer_size={capacity}"
        )
    if rows.ndim != 2 or rows.shape[1] != width or rows.dtype != np.float32 or len(rows) > capacity:
        raise ValueError(
            f"replay_buffer/rows.npy holds {rows.dtype}{list(rows.shape)}, expected float32[n, {width}] "
            f"with n <= buffer_size={capacity} (obs_dim={spec.obs_dim}, action_dim={spec.action_dim})"
        )
    if pixel_width(spec):
        pixels = arrays["pixels"]
        if pixels.shape != (len(rows), pixel_width(spec)) or pixels.dtype != np.uint8:
            raise ValueError(
                f"replay_buffer/pixels.npy holds {pixels.dtype}{list(pixels.shape)}, expected uint8"
                f"[{len(rows)}, {pixel_width(spec)}] (obs and next_obs of {len(rows)} image transitions)"
            )
    position = arrays["position"]
    if position.shape != () or position.dtype.kind not in "iu" or not 0 <= int(position) < capacity:
        shown = position.tolist() if position.shape == () else f"{position.dtype}{list(position.shape)}"
        raise ValueError(f"replay_buffer/position.npy holds {shown}, expected an integer in [0, {capacity})")


def buffer_from_arrays(buffer: UniformBuffer, arrays: BufferArrays) -> BufferState:
    """A buffer state with the saved rows; raises ValueError when they do not fit (`check_buffer_arrays`)."""
    check_buffer_arrays(buffer.capacity, buffer.spec, arrays)
    rows = arrays["rows"]
    full = np.zeros((buffer.capacity, row_width(buffer.spec)), np.float32)
    full[: len(rows)] = rows
    pixels = np.zeros((buffer.capacity, pixel_width(buffer.spec)), np.uint8)
    if pixel_width(buffer.spec):
        pixels[: len(rows)] = arrays["pixels"]
    return BufferState(
        rows=jnp.asarray(full),
        pixels=jnp.asarray(pixels),
        position=jnp.asarray(arrays["position"], jnp.int32),
        size=jnp.asarray(len(rows), jnp.int32),
    )
