#!/usr/bin/env python3
"""JAX's CPU computations run on the calling thread (rlbench's setting, rlbench.run.device) against JAX's
default, asynchronous dispatch to a worker thread: the same run trained in alternating fresh processes (the
setting is read once, when a process starts its CPU backend), so that this VM's minute-to-minute drift hits both.

    python benchmarks/async_dispatch_ab.py --algo ppo --env HalfCheetah-v4 --steps 8192 --pairs 5
    python benchmarks/async_dispatch_ab.py --algo sac --env Pendulum-v1 --steps 3000 --pairs 5

RL Zoo 2.9.2's entry for the env (hyperparams/), timed in each process as benchmarks/entry_speed.py times rlbench
(a first run compiles, the second is timed). Prints one JSON line per run and a summary with the machine's CPU flags.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import warnings
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

SETTINGS = {"inline": False, "async": True}  # name -> jax_cpu_enable_async_dispatch


def one_run(setting: str, algo: str, env: str, steps: int) -> None:
    """In this fresh process: start the CPU backend with `setting`, then time the run (train.py's own
    select_device then finds the backend running and leaves it as it is)."""
    import jax

    from rlbench.run.device import select_device

    select_device("cpu", -1, inline_cpu_calls=not SETTINGS[setting])
    jax.devices()
    warnings.filterwarnings("ignore")
    from entry_speed import rlbench_rate

    rate = rlbench_rate(algo, env, steps, "dummy", False)
    print(json.dumps({"dispatch": setting, "env_steps_per_s": round(rate, 1)}))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--algo", choices=["ppo", "a2c", "dqn", "sac", "td3"], default="ppo")
    parser.add_argument("--env", default="HalfCheetah-v4")
    parser.add_argument("--steps", type=int, default=8192)
    parser.add_argument("--pairs", type=int, default=5)
    parser.add_argument("--one", choices=sorted(SETTINGS), help=argparse.SUPPRESS)  # a child process's run
    args = parser.parse_args()
    if args.one:
        return one_run(args.one, args.algo, args.env, args.steps)
    from entry_speed import cpu_flags

    from rlbench.bench.speed import machine

    rates: dict[str, list[float]] = {name: [] for name in SETTINGS}
    for pair in range(args.pairs):
        order = list(SETTINGS) if pair % 2 == 0 else list(SETTINGS)[::-1]
        for setting in order:
            command = [sys.executable, __file__, "--one", setting, "--algo", args.algo, "--env", args.env]
            done = subprocess.run([*command, "--steps", str(args.steps)], capture_output=True, text=True, check=True)
            row = json.loads(done.stdout.strip().splitlines()[-1])
            rates[setting].append(row["env_steps_per_s"])
            print(json.dumps({"pair": pair, **row}), flush=True)
    ratios = [inline / other for inline, other in zip(rates["inline"], rates["async"], strict=True)]
    print(json.dumps({"algo": args.algo, "env": args.env, "steps": args.steps,
                      "median": {name: statistics.median(values) for name, values in rates.items()},
                      "pair_ratios": [round(r, 3) for r in ratios], "pairs_ahead": sum(r > 1 for r in ratios),
                      "machine": machine(), "cpu_flags": cpu_flags()}))  # fmt: skip


if __name__ == "__main__":
    main()
