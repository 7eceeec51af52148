"""Pinning a sweep's runs to cores of their node (Packing.pin): each run claims cores that no other run on the
node holds, through an exclusive lock file per core, and pins every thread of its worker process to them."""

from __future__ import annotations

import contextlib
import fcntl
import os
import tempfile
from pathlib import Path

CORE_LOCKS = Path(tempfile.gettempdir()) / f"rlbench-cores-{os.getuid()}"
_held_core_locks: list[int] = []  # open lock files: held for the life of the process
_held_cores: list[int] = []
ALLOWED_CORES = sorted(os.sched_getaffinity(0))  # this worker's cores before any task pinned it (a cpuset)


def lock_core(core: int) -> int | None:
    """The open lock file that holds `core` for this process until it is closed; None when another holds it."""
    CORE_LOCKS.mkdir(mode=0o700, exist_ok=True)
    fd = os.open(CORE_LOCKS / f"core{core}.lock", os.O_CREAT | os.O_RDWR, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return None
    return fd


def claim_cores(n: int) -> list[int]:
    """`n` cores of this machine that no other task holds (an exclusive lock file per core); [] (unpinned)
    when fewer are free."""
    release_cores()
    for core in ALLOWED_CORES:
        if len(_held_cores) == n:
            break
        fd = lock_core(core)
        if fd is not None:
            _held_core_locks.append(fd)
            _held_cores.append(core)
    if len(_held_cores) < n:
        release_cores()
    return list(_held_cores)


def pin_process(cores: list[int]) -> None:
    """Pin every thread of this process to `cores`: a reused worker already has XLA's thread pool, and
    sched_setaffinity(0) would move only the calling thread (new threads inherit its affinity)."""
    for tid in os.listdir("/proc/self/task"):
        with contextlib.suppress(OSError):  # a thread that just ended
            os.sched_setaffinity(int(tid), cores)


def release_cores() -> None:
    for fd in _held_core_locks:
        os.close(fd)
    _held_core_locks.clear()
    _held_cores.clear()
