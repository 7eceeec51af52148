"""`bench speed --n-seeds`: how best to train K seeds of one case on this machine (vmapped seeds in one
process, pinned processes, or both), with the same rows as the throughput benchmark."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path

from rlbench.bench.children import Row, finish_child, rlbench_row_in_subprocess, row_from, start_child


def pinned_rows(commands: list[list[str]], cases: list[Row]) -> list[Row]:
    """Run the commands at once, command i pinned to core i (as `run_seeds.sh jobs=N` pins its runs): the
    JSON row each printed."""
    processes = [start_child(["taskset", "-c", str(core), *command]) for core, command in enumerate(commands)]
    return [row_from(finish_child(process), case) for process, case in zip(processes, cases, strict=True)]


def packing_rows(
    case: Row, steps: int, seed_counts: list[int], device: str, peer: tuple[str, Path] | None, vmapped_only: bool
) -> Iterator[Row]:
    """How best to train K seeds of one case on this machine, for each K in `seed_counts`: K vmapped seeds
    in one process; K processes two at a time, each pinned to one core (`run_seeds.sh jobs=2`), for rlbench
    and the peer; K/2 vmapped seeds in each of two pinned processes. Aggregate env-steps/s counts every
    seed; per-seed env-steps/s is the aggregate over K (how fast each seed's training advances on average).
    Processes run two at a time, so their steady-state aggregate is that of two concurrent processes for
    every K >= 2 (measured once) and that of one pinned process for K = 1. `vmapped_only`: the first kind
    alone (on a GPU, where pinning processes to cores is beside the point). Yields rows as measured."""
    for k in seed_counts:
        vmapped = {**case, "steps": per_seed_steps(case, steps, k), "update_seconds": 2.0, "n_seeds": k}
        yield {**rlbench_row_in_subprocess(vmapped, device), "packing": "one process, K vmapped seeds", "n_seeds": k}
    if vmapped_only:
        return
    one_row = [sys.executable, "-m", "rlbench.bench", "speed", "--device", device, "--one-row"]
    yield from process_rows(case, seed_counts, [*one_row, json.dumps({**case, "steps": steps, "update_seconds": 0.5})])
    if peer is not None:
        python, script = peer
        flags = ["--algo", case["algo"], "--env", case["env_id"], "--n-envs", str(case["n_envs"])]
        flags += ["--gradient-steps", str(case["gradient_steps"]), "--steps", str(steps), "--qf", *map(str, case["qf"])]
        yield from process_rows(case, seed_counts, [python, str(script), *flags], system="peer")
    for k in seed_counts:
        if k >= 2 and k % 2 == 0:
            half = {**case, "steps": per_seed_steps(case, steps, k // 2), "update_seconds": 0.5, "n_seeds": k // 2}
            rows = pinned_rows([[*one_row, json.dumps(half)]] * 2, [case] * 2)
            yield packing_summary(case, "two pinned processes, K/2 vmapped seeds each", k, rows)


def per_seed_steps(case: Row, steps: int, n_seeds: int) -> int:
    """Each seed's timed steps: about the same wall time for every row."""
    return max(steps // n_seeds, 100 * case["n_envs"])


def process_rows(case: Row, seed_counts: list[int], command: list[str], system: str = "rlbench") -> Iterator[Row]:
    """K processes of `command`, two at a time, each pinned: measured once alone and once two at once."""
    concurrent = sorted({min(k, 2) for k in seed_counts})
    measured = {n: pinned_rows([command] * n, [case] * n) for n in concurrent}
    for k in seed_counts:
        yield packing_summary(case, "K processes, two at a time, pinned", k, measured[min(k, 2)], system)


def packing_summary(case: Row, packing: str, n_seeds: int, measured: list[Row], system: str = "rlbench") -> Row:
    """One packing's row: the processes' env-steps/s summed, and per seed."""
    if any("error" in row for row in measured):
        return {**case, "system": system, "packing": packing, "n_seeds": n_seeds, "error": measured}
    total = sum(row["env_steps_per_s"] for row in measured)
    return {
        **case,
        "system": system,
        "packing": packing,
        "n_seeds": n_seeds,
        "env_steps_per_s": round(total, 1),
        "per_seed_env_steps_per_s": round(total / n_seeds, 1),
        "processes": [
            {key: row.get(key) for key in ("n_seeds", "env_steps_per_s", "compile_s", "peak_rss_mib")}
            for row in measured
        ],
    }
