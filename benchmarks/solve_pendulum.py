#!/usr/bin/env python3
"""Wall time for 5 seeds of SAC to solve Pendulum, three ways in one invocation (issue 36's CPU figure):

- rlbench's device loop on gymnax:Pendulum-v1, the 5 seeds vmapped in one process (`--n-seeds 5`), and one
  process per seed, two at a time pinned one per core;
- rlbench's host loop on gymnasium's Pendulum-v1, one process per seed, two at a time pinned one per core
  (the packing `python -m rlbench.sweep` picks on CPUs);
- SBX through RL Zoo (`--peer PYTHON`) on Pendulum-v1, packed the same way (SBX has no vmapped seeds).

Every run uses its library's own Pendulum-v1 entry (RL Zoo's: learning_rate 1e-3, [256, 256]; rlbench's
gymnax twin is the same entry) and -n N env steps, then 10 deterministic evaluation episodes per seed. Prints
one JSON line per way: the wall time from the first process's start to the last one's end, and each seed's
final evaluation return ("solved": every seed >= -200).

    python benchmarks/solve_pendulum.py --peer /work/peer-venv/bin/python -n 10000
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from rlbench.bench.peer import BOOTSTRAP

REPO = Path(__file__).resolve().parent.parent
SEEDS = [1, 2, 3, 4, 5]


def final_returns(folder: Path, pattern: str) -> list[float]:
    """Each run's last evaluation mean, in seed order of the folders' numbers."""
    runs = sorted(folder.glob(pattern), key=lambda path: int(path.name.rsplit("_", 1)[1]))
    return [round(float(np.load(run / "evaluations.npz")["results"][-1].mean()), 1) for run in runs]


def run_packed(commands: list[list[str]], env: dict) -> float:
    """Run the commands two at a time, each pinned to one core; the wall time of all of them."""
    start, running, queue = time.perf_counter(), [], list(commands)
    cores = [0, 1]
    while queue or running:
        while queue and cores:
            core = cores.pop(0)
            proc = subprocess.Popen(["taskset", "-c", str(core), *queue.pop(0)], env=env, cwd=REPO,
                                    stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)  # fmt: skip
            running.append((proc, core))
        time.sleep(0.2)
        for proc, core in list(running):
            if proc.poll() is not None:
                if proc.returncode != 0:
                    raise SystemExit(f"{proc.args} exited {proc.returncode}: {proc.stderr.read()[-2000:]}")
                running.remove((proc, core))
                cores.append(core)
    return time.perf_counter() - start


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("-n", type=int, default=10_000, help="env steps per seed")
    p.add_argument("--peer", help="python of a venv with SBX and RL Zoo")
    p.add_argument("--only-packed-device", action="store_true", help="only the device loop, one process per seed")
    args = p.parse_args()
    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    common = ["-n", str(args.n), "--eval-freq", str(args.n), "--eval-episodes", "10", "--verbose", "0"]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        if not args.only_packed_device:
            start = time.perf_counter()
            device = [sys.executable, "train.py", "--algo", "sac", "--env", "gymnax:Pendulum-v1", "--seed", "1",
                      "--n-seeds", "5", "-f", str(folder / "device"), *common]  # fmt: skip
            subprocess.run(device, env=env, cwd=REPO, check=True, stdout=subprocess.DEVNULL)
            rows.append(("rlbench device loop, 5 seeds vmapped in one process", time.perf_counter() - start,
                         final_returns(folder / "device" / "sac", "gymnax_Pendulum-v1_*")))  # fmt: skip
        device_packed = [[sys.executable, "train.py", "--algo", "sac", "--env", "gymnax:Pendulum-v1", "--seed",
                          str(seed), "-f", str(folder / "device_packed"), *common] for seed in SEEDS]  # fmt: skip
        seconds = run_packed(device_packed, env)
        rows.append(("rlbench device loop, 5 processes, 2 at a time pinned", seconds,
                     final_returns(folder / "device_packed" / "sac", "gymnax_Pendulum-v1_*")))  # fmt: skip
        if not args.only_packed_device:
            host = [[sys.executable, "train.py", "--algo", "sac", "--env", "Pendulum-v1", "--seed", str(seed),
                     "-f", str(folder / "host"), *common] for seed in SEEDS]  # fmt: skip
            seconds = run_packed(host, env)
            rows.append(("rlbench host loop, 5 processes, 2 at a time pinned", seconds,
                         final_returns(folder / "host" / "sac", "Pendulum-v1_*")))  # fmt: skip
            if args.peer:
                # SBX's classes in RL Zoo's table, as `bench returns --peer` runs the peer (rlbench.bench.peer).
                peer = [[args.peer, "-c", BOOTSTRAP, "", "--algo", "sac", "--env", "Pendulum-v1", "--seed", str(seed),
                         "-f", str(folder / "sbx"), "-n", str(args.n), "--eval-freq", str(args.n),
                         "--eval-episodes", "10", "--verbose", "0"] for seed in SEEDS]  # fmt: skip
                peer_env = {**env, "PYTHONPATH": ""}
                seconds = run_packed(peer, peer_env)
                rows.append(("sbx (RL Zoo), 5 processes, 2 at a time pinned", seconds,
                             final_returns(folder / "sbx" / "sac", "Pendulum-v1_*")))  # fmt: skip
    for name, seconds, finals in rows:
        solved = len(finals) == 5 and min(finals) >= -200
        print(json.dumps({"way": name, "env_steps_per_seed": args.n, "wall_s": round(seconds, 1),
                          "final_returns": finals, "solved": solved}), flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
