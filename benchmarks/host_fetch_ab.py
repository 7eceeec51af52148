#!/usr/bin/env python3
"""The act call's result awaited by polling against blocking, alternated in one process (rlbench.loop.host_fetch):
each pair trains the same run twice, once with polling off (limit 0: `np.asarray` blocks at once, as before it)
and once with rlbench's limit, in alternating order, so that this VM's minute-to-minute drift hits both alike.

    python benchmarks/host_fetch_ab.py --algo ppo --env HalfCheetah-v4 --steps 8192 --pairs 6
    python benchmarks/host_fetch_ab.py --algo dqn --env CartPole-v1 --steps 20000 --pairs 6

RL Zoo 2.9.2's entry for the env (hyperparams/), timed as benchmarks/entry_speed.py times rlbench (a first run
compiles). Prints one JSON line per run and a summary with the machine's CPU flags.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

from entry_speed import cpu_flags, rlbench_rate, warmup_of  # noqa: E402

from rlbench.bench.speed import machine  # noqa: E402
from rlbench.loop import host_fetch  # noqa: E402


def rate_with_limit(limit_s: float, algo: str, env: str, steps: int) -> float:
    host_fetch.POLL_LIMIT_S = limit_s
    return rlbench_rate(algo, env, steps, "dummy", False)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--algo", choices=["ppo", "dqn", "sac"], default="ppo")
    parser.add_argument("--env", default="HalfCheetah-v4")
    parser.add_argument("--steps", type=int, default=8192)
    parser.add_argument("--pairs", type=int, default=6)
    args = parser.parse_args()
    polling = host_fetch.POLL_LIMIT_S
    rate_with_limit(polling, args.algo, args.env, warmup_of(args.algo, args.env))  # compiles both variants' programs
    rates: dict[str, list[float]] = {"blocking": [], "polling": []}
    for pair in range(args.pairs):
        order = [("blocking", 0.0), ("polling", polling)]
        for name, limit in order if pair % 2 == 0 else order[::-1]:
            rate = rate_with_limit(limit, args.algo, args.env, args.steps)
            rates[name].append(rate)
            print(json.dumps({"pair": pair, "wait": name, "env_steps_per_s": round(rate, 1)}), flush=True)
    ratios = [p / b for p, b in zip(rates["polling"], rates["blocking"], strict=True)]
    summary = {name: round(statistics.median(values), 1) for name, values in rates.items()}
    print(json.dumps({"algo": args.algo, "env": args.env, "steps": args.steps, "median": summary,
                      "pair_ratios": [round(r, 3) for r in ratios], "pairs_ahead": sum(r > 1 for r in ratios),
                      "machine": machine(), "cpu_flags": cpu_flags()}))  # fmt: skip


if __name__ == "__main__":
    main()
