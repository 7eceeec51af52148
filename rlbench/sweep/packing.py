"""How a sweep packs its seeds onto the cluster: seeds per process, CPUs and GPUs per process.

The defaults follow what `python -m rlbench.bench speed --n-seeds` measured (benchmarks/README.md, "Many
seeds in one process"): on a CPU, processes pinned one per core beat vmapped seeds in one process (SAC
313 against 216 env-steps/s on 2 cores, CrossQ 27.4 against 22.2), so CPU nodes get one seed per process
on one pinned core. On a GPU one process uses a sliver of the chip, and vmapped seeds cost about as much
as one, so GPU nodes get many seeds per process and several processes per GPU (fractional GPUs).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from rlbench.errors import ConfigError
from rlbench.run.device import split_device

GPU_SEEDS_PER_PROCESS = 8
GPU_PROCESSES_PER_GPU = 4


@dataclass(frozen=True)
class Packing:
    seeds_per_process: int
    cpus_per_run: float
    gpus_per_run: float
    reason: str

    @property
    def pin(self) -> bool:
        """Pin each process to its own whole cores (CPU runs only: a GPU run's host work is light)."""
        return self.gpus_per_run == 0 and float(self.cpus_per_run).is_integer()

    @property
    def device(self) -> str:
        """train.py's --device: a process given no GPU must not touch one that Ray gave to others."""
        return "cpu" if self.gpus_per_run == 0 else "gpu"

    def plain(self) -> dict[str, object]:
        return {
            "seeds_per_process": self.seeds_per_process,
            "cpus_per_run": self.cpus_per_run,
            "gpus_per_run": self.gpus_per_run,
            "pinned": self.pin,
            "reason": self.reason,
        }


def cell_device(device: str, packing: Packing) -> str:
    """A cell's --device: the packing's where the sweep's is auto; without a GPU index, because a process sees
    only the GPUs Ray gave it (as GPU 0, 1, ...), and a private instance only the GPU `--device gpu:N` named."""
    kind, _ = split_device(device)
    return packing.device if kind == "auto" else kind


def choose_packing(
    resources: Mapping[str, float],
    n_seeds: int,
    seeds_per_process: int | None = None,
    cpus_per_run: float | None = None,
    gpus_per_run: float | None = None,
) -> Packing:
    """The packing for a cluster with `resources` (ray.cluster_resources()); flags override each part."""
    check_flags(seeds_per_process, cpus_per_run, gpus_per_run)
    n_gpus = float(resources.get("GPU", 0))
    n_cpus = float(resources.get("CPU", 0))
    use_gpu = gpus_per_run > 0 if gpus_per_run is not None else n_gpus > 0
    if use_gpu:
        seeds = seeds_per_process or min(n_seeds, GPU_SEEDS_PER_PROCESS)
        gpus = gpus_per_run if gpus_per_run is not None else 1 / GPU_PROCESSES_PER_GPU
        cpus = cpus_per_run if cpus_per_run is not None else 1
        reason = (
            f"GPU cluster ({n_gpus:g} GPUs): {seeds} vmapped seeds per process, {gpus:g} GPU and {cpus:g} CPU "
            f"each ({1 / gpus:g} processes per GPU), because on a GPU a process leaves most of the chip idle "
            "and K vmapped seeds cost about as much as one"
        )
    else:
        seeds = seeds_per_process or 1
        cpus = cpus_per_run if cpus_per_run is not None else 1
        gpus = 0.0
        if not float(cpus).is_integer():
            pinned = "unpinned (a fraction of a core)"
        else:
            pinned = "pinned to its own core" if cpus == 1 else f"pinned to its own {cpus:g} cores"
        reason = (
            f"CPU cluster ({n_cpus:g} CPUs, no GPU): {seeds} seed{'s' if seeds > 1 else ''} per process, "
            f"{cpus:g} CPU each, {pinned}, because on CPUs processes pinned one per core trained faster "
            "than vmapped seeds (SAC 313 vs 216 env-steps/s on 2 cores; benchmarks/README.md)"
        )
    if seeds_per_process or cpus_per_run is not None or gpus_per_run is not None:
        reason += " (flags override the default)"
    return Packing(seeds, float(cpus), float(gpus), reason)


def check_flags(seeds_per_process: int | None, cpus_per_run: float | None, gpus_per_run: float | None) -> None:
    """ConfigError (exit 2) naming the flag whose value Ray could not run."""
    for flag, value, lowest in (
        ("--seeds-per-process", seeds_per_process, 1),
        ("--cpus-per-run", cpus_per_run, 0.01),
        ("--gpus-per-run", gpus_per_run, 0),
    ):
        if value is not None and value < lowest:
            raise ConfigError(f"{flag}: expected a number >= {lowest}, got {value}")
    if gpus_per_run is not None and gpus_per_run > 1 and not float(gpus_per_run).is_integer():
        raise ConfigError(f"--gpus-per-run: above 1, a whole number of GPUs (Ray's rule), got {gpus_per_run}")


def fitting_nodes(packing: Packing, nodes: list[Mapping[str, float]]) -> int:
    """How many of the nodes (each node's total resources) can hold one process of the packing."""
    return sum(
        float(node.get("CPU", 0)) >= packing.cpus_per_run and float(node.get("GPU", 0)) >= packing.gpus_per_run
        for node in nodes
    )


def describe_need(packing: Packing, nodes: list[Mapping[str, float]]) -> str:
    """What one process needs and what the nodes have, for the message that refuses a packing no node fits."""
    need = f"{packing.cpus_per_run:g} CPU" + (f" and {packing.gpus_per_run:g} GPU" if packing.gpus_per_run else "")
    have = ", ".join(
        f"{float(node.get('CPU', 0)):g} CPU" + (f" {float(node.get('GPU', 0)):g} GPU" if node.get("GPU") else " no GPU")
        for node in nodes[:8]
    )
    flags = "--cpus-per-run" + (" / --gpus-per-run" if packing.gpus_per_run else "")
    return f"each process needs {need}, and no node has that (nodes: {have or 'none'}); lower {flags}"
