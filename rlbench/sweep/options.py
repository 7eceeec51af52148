"""How a sweep runs: the options that change none of its results, so none of them is part of the grid
(rlbench.sweep.grid) or of its manifest's check against another grid.

Its own module because the invocation (rlbench.sweep.engine), the cluster checks (rlbench.sweep.cluster) and
the scheduling loop (rlbench.sweep.scheduler) all read it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class SweepOptions:
    """How to run a sweep (none of it changes its results, so none of it is part of the grid)."""

    log_root: Path
    address: str | None = None  # None: a private local Ray instance; "auto" or HOST:PORT: a running cluster
    max_retries: int = 2
    shared_fs: bool = True
    seeds_per_process: int | None = None
    cpus_per_run: float | None = None
    gpus_per_run: float | None = None
    retry_failed: bool = False
    compile_cache: str | None = None
    at_steps: int = 100_000
    report: bool = True
    # On a cluster, how long to wait for a node that fits one process (an autoscaler may be adding one)
    # before giving up; a private instance has all its nodes at the start, so it does not wait.
    node_wait_s: float = 300.0
    # Lines for the console once every check has passed (the compilation cache, a note on short runs):
    # a bad-input error is the first line printed.
    notes: tuple[str, ...] = ()
