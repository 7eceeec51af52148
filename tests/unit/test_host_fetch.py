"""rlbench.loop.host_fetch: a device result awaited by polling for a bounded time, then by blocking."""

import time

import jax
import jax.numpy as jnp
import numpy as np

from rlbench.loop.host_fetch import fetch_polling


@jax.jit
def slow_program(x: jax.Array) -> jax.Array:
    """A few hundred ms of matrix products on the CPU: long against any polling limit."""
    return jax.lax.fori_loop(0, 3000, lambda _, m: jnp.tanh(m @ m) * 0.5, x)


def waited(limit_s: float) -> tuple[np.ndarray, float, float]:
    """(the result, the calling thread's CPU seconds while it waited, the wall seconds of the wait)."""
    x = jnp.full((256, 256), 0.01, jnp.float32)
    slow_program(x).block_until_ready()  # compiled before it is timed
    result = slow_program(x)
    cpu, wall = time.thread_time(), time.perf_counter()
    fetched = fetch_polling(result, limit_s)
    return fetched, time.thread_time() - cpu, time.perf_counter() - wall


def test_the_fetched_array_is_the_device_result():
    x = jnp.arange(12, dtype=jnp.float32).reshape(3, 4)
    fetched = fetch_polling(jax.jit(lambda a: a * 2 + 1)(x))
    assert isinstance(fetched, np.ndarray) and fetched.dtype == np.float32
    np.testing.assert_array_equal(fetched, np.arange(12, dtype=np.float32).reshape(3, 4) * 2 + 1)
    np.testing.assert_array_equal(fetch_polling(np.ones(3)), np.ones(3))  # a host array passes through


def test_a_long_call_is_polled_up_to_the_limit_then_blocked_on():
    # Polling keeps the calling thread on the CPU for the whole wait; past the limit it sleeps until the result.
    fetched, cpu_blocking, wall_blocking = waited(limit_s=0.005)
    assert wall_blocking > 0.1, "the program must outlast the limit by far for this test to say anything"
    blocking_share = cpu_blocking / wall_blocking
    assert blocking_share < 0.1  # the 5 ms of polling, then sleep
    fetched_polled, cpu_polling, wall_polling = waited(limit_s=60.0)
    # The poller shares two cores with XLA's threads and, under `pytest -n 2`, the other worker's: it got 37% of
    # its wait on a loaded CI VM (82% alone), so the bound is twice a sleeping thread's limit, not a full core.
    polling_share = cpu_polling / wall_polling
    assert polling_share > 0.2
    np.testing.assert_array_equal(fetched, fetched_polled)
