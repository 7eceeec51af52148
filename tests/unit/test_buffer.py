"""Replay buffer invariants: wrap-around, sampling only filled rows, packing round trip."""

import jax
import jax.numpy as jnp
import numpy as np

from rlbench.buffers.uniform import make_uniform_buffer
from rlbench.types import EnvSpec, Transition

SPEC = EnvSpec(obs_dim=2, action_dim=1)


def transitions(start: int, n: int) -> Transition:
    ids = jnp.arange(start, start + n, dtype=jnp.float32)
    return Transition(
        obs=jnp.stack([ids, -ids], 1),
        action=(ids / 100)[:, None],
        reward=ids,
        next_obs=jnp.stack([ids + 1, -ids - 1], 1),
        terminated=(ids % 2),
    )


def test_wraps_around_and_overwrites_oldest():
    buffer = make_uniform_buffer(5, SPEC)
    state = buffer.init_fn()
    state = buffer.add_fn(state, transitions(0, 3))
    state = buffer.add_fn(state, transitions(3, 4))  # 7 rows into 5: rows 0, 1 overwritten by 5, 6
    assert int(state.size) == 5 and int(state.position) == 2
    rewards = np.asarray(state.rows[:, 5])  # reward column: 2 * obs_dim + action_dim
    np.testing.assert_array_equal(rewards, [5, 6, 2, 3, 4])


def test_samples_only_filled_rows_and_unpacks_fields():
    buffer = make_uniform_buffer(100, SPEC)
    state = buffer.add_fn(buffer.init_fn(), transitions(10, 3))
    batch = buffer.sample_fn(state, jax.random.key(0), 64)
    assert set(np.asarray(batch.reward).tolist()) <= {10.0, 11.0, 12.0}
    np.testing.assert_array_equal(batch.obs[:, 0], batch.reward)
    np.testing.assert_array_equal(batch.next_obs[:, 0], batch.reward + 1)
    np.testing.assert_allclose(batch.action[:, 0], batch.reward / 100)
    np.testing.assert_array_equal(batch.terminated, batch.reward % 2)


def test_fixed_key_gives_fixed_sample():
    buffer = make_uniform_buffer(50, SPEC)
    state = buffer.add_fn(buffer.init_fn(), transitions(0, 50))
    a = buffer.sample_fn(state, jax.random.key(7), 8)
    b = buffer.sample_fn(state, jax.random.key(7), 8)
    np.testing.assert_array_equal(a.reward, b.reward)


def test_insert_is_in_place_under_donation():
    buffer = make_uniform_buffer(1000, SPEC)
    add = jax.jit(buffer.add_fn, donate_argnums=0)
    state = buffer.init_fn()
    before = state.rows.unsafe_buffer_pointer()
    state = add(state, transitions(0, 4))
    assert state.rows.unsafe_buffer_pointer() == before
