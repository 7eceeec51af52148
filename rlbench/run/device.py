"""The JAX device and thread count a process runs on, applied before anything starts a JAX backend.

`--device` (train.py, enjoy.py, the sweep, the benchmarks): auto (a GPU if JAX finds one), cpu, gpu or cuda,
or gpu:N / cuda:N for the N-th GPU; `--num-threads 1` makes XLA's CPU work single-threaded.
"""

from __future__ import annotations

import os

import jax

from rlbench.errors import ConfigError

DEVICE_KINDS = ("auto", "cpu", "gpu", "cuda")  # and gpu:N / cuda:N, the N-th GPU


def split_device(device: str) -> tuple[str, int | None]:
    """`--device` as (kind, GPU index or None); ValueError for anything but DEVICE_KINDS and gpu:N / cuda:N."""
    kind, colon, index = device.partition(":")
    if kind not in DEVICE_KINDS or (colon and (kind not in ("gpu", "cuda") or not index.isdigit())):
        raise ValueError(f"expected auto, cpu, gpu, cuda, gpu:N or cuda:N, got {device!r}")
    return kind, int(index) if colon else None


def select_device(device: str, num_threads: int, inline_cpu_calls: bool = False) -> None:
    """Apply --device and --num-threads before JAX starts its backend; exit 2 for a missing GPU. `gpu:N`
    makes the N-th GPU JAX's default device: every array and computation of this process goes there.

    `inline_cpu_calls`: the CPU backend runs each computation on the calling thread instead of handing it to
    a worker thread (JAX's default). A host loop that calls a small program once per env step (PPO's and A2C's
    acting, enjoy.py) skips the hand-off and the worker's wake-up, which cost more than such a call on a CPU:
    +12-15% env-steps/s (benchmarks/README.md). A long program still runs on XLA's threads with the GIL
    released. Read when the CPU backend starts: a process whose backend already runs keeps its setting."""
    if num_threads not in (-1, 1):
        raise ConfigError(
            f"--num-threads: only -1 (XLA's default) or 1 (single-threaded) are supported, "
            f"got {num_threads}; XLA sizes its CPU thread pool itself"
        )
    if num_threads == 1:
        os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " --xla_cpu_multi_thread_eigen=false").strip()
    jax.config.update("jax_cpu_enable_async_dispatch", not inline_cpu_calls)
    kind, index = split_device(device)
    if kind == "cpu":
        jax.config.update("jax_platforms", "cpu")
    elif kind in ("gpu", "cuda"):
        try:
            gpus = jax.devices("gpu")
        except RuntimeError:
            found = ", ".join(str(d) for d in jax.devices())
            raise ConfigError(
                f"--device {device}: no GPU found (devices: {found}); install rlbench[cuda] "
                "on a machine with an NVIDIA GPU, or use --device cpu/auto"
            ) from None
        if index is not None and index >= len(gpus):
            raise ConfigError(
                f"--device {device}: there is no GPU {index}; found {len(gpus)} "
                f"({', '.join(str(gpu) for gpu in gpus)}): use gpu:0 to gpu:{len(gpus) - 1}"
            )
        jax.config.update("jax_platforms", "cuda")
        if index is not None:
            jax.config.update("jax_default_device", gpus[index])
