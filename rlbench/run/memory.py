"""Memory checks made before anything is allocated: a run that cannot fit is refused with exit 2 and
a setting to lower, instead of a JAX out-of-memory traceback after the run folder exists (RELIABILITY H1).
The open-file check bounds `--n-seeds` the same way, before any run folder is claimed."""

from __future__ import annotations

import resource
from pathlib import Path
from typing import Any

import jax

from rlbench.algos.common.learner import Learner
from rlbench.buffers.uniform import bytes_per_transition
from rlbench.errors import ConfigError
from rlbench.store.learner_state import state_array_bytes
from rlbench.types import EnvSpec, VecEnvKind

# File descriptors kept for everything but the seeds' files: Python, JAX's runtime, the envs' own files, W&B.
OPEN_FILES_RESERVE = 256


def current_device() -> jax.Device:
    """Where this process's arrays go: the default device `--device gpu:N` set, else JAX's first."""
    device = jax.config.jax_default_device  # type: ignore[attr-defined]  # an option set on Config at run time
    return device if isinstance(device, jax.Device) else jax.devices()[0]


def available_memory_bytes() -> int | None:
    """Memory a new device buffer can use: free accelerator memory, or the host's MemAvailable."""
    device = current_device()
    if device.platform != "cpu":
        stats = device.memory_stats() or {}
        if "bytes_limit" in stats:
            return int(stats["bytes_limit"] - stats.get("bytes_in_use", 0))
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def check_buffer_memory(capacity: int, spec: EnvSpec, verbose: int, n_seeds: int = 1, remedy: str = "") -> None:
    """Refuse (exit 2) replay buffers (one per seed) that cannot fit, before allocating them; then print
    their size (`buffer_summary`) if `verbose` (after the check: an error line comes first). `remedy` replaces
    the advice to lower buffer_size (where the size comes from a checkpoint, not a flag)."""
    per_row = bytes_per_transition(spec)
    total = n_seeds * capacity * per_row
    available = available_memory_bytes()
    buffers = f"{n_seeds} x " if n_seeds > 1 else ""
    if available is not None and total > available:
        fits = max(1, int(available * 0.8) // (per_row * n_seeds))
        # An image's obs and next_obs are most of a transition: say so (a frame stack multiplies them).
        images = f", 2 x uint8 {list(spec.image_shape)} observations each" if spec.image_shape else ""
        raise ConfigError(
            f"replay buffer needs {total / 2**30:.2f} GiB ({buffers}{capacity:,} x {per_row} B{images}) but only "
            f"{available / 2**30:.2f} GiB is available; "
            + (
                remedy
                or f"lower buffer_size (e.g. -params buffer_size:{fits})" + (" or --n-seeds" if n_seeds > 1 else "")
            )
        )
    if verbose:
        print(buffer_summary(capacity, spec, n_seeds))


def buffer_summary(capacity: int, spec: EnvSpec, n_seeds: int = 1) -> str:
    per_row = bytes_per_transition(spec)
    buffers = f"{n_seeds} x " if n_seeds > 1 else ""
    device = current_device()
    return (
        f"Replay buffer: {buffers}{capacity:,} transitions x {per_row} B = {n_seeds * capacity * per_row / 2**20:,.1f} "
        f"MiB on {device.platform}"
    )


def check_learner_memory(learner: Learner[Any], spec: EnvSpec, n_seeds: int = 1) -> None:
    """Refuse (exit 2) networks or batches whose update, for every seed, cannot fit beside the replay buffers."""
    available = available_memory_bytes()
    if available is None:
        return
    state = state_array_bytes(learner.init_fn)
    # The state, its gradients and the updated state can be alive at once inside an update.
    needed = n_seeds * (3 * state + learner.activation_bytes)
    free = available - n_seeds * learner.storage.replay_capacity * bytes_per_transition(spec)
    if needed > free:
        raise ConfigError(
            f"the learner needs about {needed / 2**30:.2f} GiB (state {state / 2**30:.2f} GiB, the temporaries "
            f"of one training iteration {learner.activation_bytes / 2**30:.2f} GiB) but only "
            f"{max(free, 0) / 2**30:.2f} GiB is available beside the replay buffer; lower batch_size, net_arch, "
            "or gradient_steps (n_steps on-policy)"
            + (f" (for each of {n_seeds} seeds), or --n-seeds" if n_seeds > 1 else "")
        )


def open_files_per_seed(n_envs: int, vec_env: VecEnvKind) -> int:
    """What one seed keeps open for the whole run: progress.csv, a TensorBoard event file (-tb) and one
    Monitor file per env; with subprocess envs also each worker's pipe and process handle."""
    return 2 + n_envs * (3 if vec_env == "subproc" else 1)


def check_open_files(n_seeds: int, n_envs: int, vec_env: VecEnvKind) -> None:
    """Bound --n-seeds by the open-file limit (RLIMIT_NOFILE), the first resource K seeds exhaust: past it
    the run would die at start with "Too many open files". The soft limit is raised to what the run needs
    when the hard limit allows; beyond the hard limit, exit 2 with the number of seeds that fit."""
    per_seed = open_files_per_seed(n_envs, vec_env)
    needed = n_seeds * per_seed + OPEN_FILES_RESERVE
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY or needed <= soft:
        return
    if hard == resource.RLIM_INFINITY or needed <= hard:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (needed, hard))
            return
        except (OSError, ValueError):
            hard = soft  # not raisable here after all: the soft limit is the bound
    fits = max(0, (hard - OPEN_FILES_RESERVE) // per_seed)
    advice = f"train at most {fits} seeds per process (more processes, or a sweep)" if fits else "lower n_envs"
    raise ConfigError(
        f"--n-seeds {n_seeds}: each seed keeps {per_seed} files open for the whole run (progress.csv, a TensorBoard "
        f"file, its envs' Monitor files{' and pipes' if vec_env == 'subproc' else ''}), so {n_seeds} seeds need "
        f"{needed} file descriptors, and this process may open {hard} (ulimit -n); {advice}, or raise the limit"
    )
