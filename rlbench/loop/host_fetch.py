"""Bringing a short device call's result to the host without putting the calling thread to sleep.

XLA:CPU runs a jitted call on its own threads; `np.asarray` then blocks the caller until the result is
ready, and the thread's sleep and wake-up cost more than a small policy's whole computation on the VMs
measured (benchmarks/README.md, "The act call awaited by polling"). A loop that acts once per env step pays
that every step, so the act calls' results are awaited by polling `is_ready()` for a short while, and by
blocking after it: a long call (a large network, many envs) still leaves both cores to XLA.

Where the process's CPU backend runs computations on the calling thread (PPO, A2C and enjoy.py:
rlbench.run.device), the result is ready when the call returns and the first check ends the wait; the poll
serves the other algorithms' acting on a CPU, and acting on a GPU.
"""

from __future__ import annotations

import time

import jax
import numpy as np

# Longer than a small policy's call (13-60 us measured), short against one of a large network's.
POLL_LIMIT_S = 200e-6


def fetch_polling(x: jax.Array | np.ndarray, limit_s: float | None = None) -> np.ndarray:
    """`x` as a numpy array, awaited by polling for up to `limit_s` (None: POLL_LIMIT_S), then by blocking."""
    limit_s = POLL_LIMIT_S if limit_s is None else limit_s
    is_ready = getattr(x, "is_ready", None)  # jaxlib's ArrayImpl has it; jax.Array's typed interface does not
    if is_ready is not None:
        deadline = time.perf_counter() + limit_s
        while not is_ready() and time.perf_counter() < deadline:
            pass
    return np.asarray(x)
