#!/usr/bin/env python3
"""PPO's and DQN's speed beside SBX's, side by side in one invocation (issues 45, 48): for each env, rlbench's
learner and SBX's (benchmarks/sbx_entry_speed.py in the peer's venv) with RL Zoo 2.9.2's entry for that env,
alternated `--rounds` times so that machine noise hits both, each timed after a warm-up that pays for compilation.

    python benchmarks/entry_speed.py --peer .venv-peer/bin/python --case CartPole-v1 20000 --case HalfCheetah-v4 8192
    python benchmarks/entry_speed.py --peer .venv-peer/bin/python --case gymnax:CartPole-v1 200000
    python benchmarks/entry_speed.py --peer .venv-peer/bin/python --algo dqn --case CartPole-v1 20000
    python benchmarks/entry_speed.py --peer .venv-peer/bin/python --case envpool:HalfCheetah-v4 8192 \
        --vec-env envpool-xla --no-normalize

`--vec-env` is rlbench's (`envpool-xla`: the device loop on EnvPool); `--no-normalize` drops the entry's
`normalize` on both sides (the device loop does not take it yet).

A JAX-native id (`gymnax:CartPole-v1`) trains on rlbench's device loop with RL Zoo's entry for the gymnasium id
of the same name (given as -params: RL Zoo's files name gymnasium's ids), beside SBX's PPO on gymnasium's env.

rlbench is timed in this process, whose CPU backend starts as train.py starts it for the algorithm (rlbench.run.
device: PPO's computations run on the calling thread): a first training run of two rollouts compiles its programs,
a second run with the same settings (whose compiled programs are reused) is timed whole (env creation included).
SBX is timed as its own learn() after a first learn() of two rollouts (DQN: past learning_starts, then two
training rounds). Prints one JSON line per measurement and a summary line per env, with the machine (CPU model
and flags).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from rlbench.bench.speed import machine  # noqa: E402
from rlbench.cli.train import main as train  # noqa: E402
from rlbench.config.registry import get_algo  # noqa: E402
from rlbench.run.device import select_device  # noqa: E402


def cpu_flags() -> list[str]:
    """The CPU flags that decide matrix-product speed (bfloat16 paths)."""
    flags = Path("/proc/cpuinfo").read_text().split("flags")[1].split("\n")[0].split()
    return sorted(f for f in flags if f.startswith(("avx512", "amx", "avx2", "fma")))


def zoo_entry(algo: str, env_id: str) -> dict:
    """RL Zoo's <algo>.yml entry of the gymnasium id (`gymnax:CartPole-v1` -> `CartPole-v1`)."""
    return yaml.safe_load((REPO / "hyperparams" / f"{algo}.yml").read_text())[env_id.rpartition(":")[2]]


def warmup_of(algo: str, env_id: str) -> int:
    """Env steps that compile every program: two rollouts (PPO), or learning_starts and two training rounds (DQN)."""
    entry = zoo_entry(algo, env_id)
    n_envs = int(entry.get("n_envs", 1))
    if algo == "ppo":
        return 2 * int(entry.get("n_steps", 2048)) * n_envs
    return int(entry.get("learning_starts", 100)) + 2 * int(entry.get("train_freq", 4)) * n_envs


def zoo_params(algo: str, env_id: str, no_normalize: bool) -> list[str]:
    """-params with the gymnasium id's entry, for a JAX-native or EnvPool id (none for a gymnasium id: its entry
    applies), and `normalize:False` with `no_normalize`."""
    off = ["normalize:False"] if no_normalize else []
    if ":" not in env_id:
        return ["-params", *off] if off else []
    entry = {key: value for key, value in zoo_entry(algo, env_id).items() if key not in ("n_timesteps", "policy")}
    if no_normalize:
        entry.pop("normalize", None)
    return ["-params", *(f"{key}:{value}" for key, value in entry.items()), *off]


def rlbench_rate(algo: str, env_id: str, steps: int, vec_env: str, no_normalize: bool) -> float:
    with tempfile.TemporaryDirectory() as folder:
        argv = ["--algo", algo, "--env", env_id, "-f", folder, "--eval-freq", "-1", "--verbose", "0", "--seed", "0"]
        argv += ["--vec-env", vec_env, *zoo_params(algo, env_id, no_normalize)]
        quiet = contextlib.redirect_stdout(io.StringIO())
        with quiet:
            assert train([*argv, "-n", str(warmup_of(algo, env_id))]) == 0  # compiles
        start = time.perf_counter()
        with quiet:
            assert train([*argv, "-n", str(steps)]) == 0
        return steps / (time.perf_counter() - start)


def sbx_rate(peer: str, algo: str, env_id: str, steps: int, no_normalize: bool) -> dict:
    gym_id = env_id.rpartition(":")[2]  # SBX trains on gymnasium's env of the same name
    command = [peer, str(REPO / "benchmarks" / "sbx_entry_speed.py"), "--algo", algo, "--env", gym_id]
    command += ["--steps", str(steps)]
    command += ["--no-normalize"] if no_normalize else []
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "CUDA_VISIBLE_DEVICES": "", "JAX_PLATFORMS": "cpu"}
    done = subprocess.run(command, capture_output=True, text=True, check=True, env=env, timeout=3600)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--peer", required=True, help="the Python of a venv with sbx-rl (and gymnasium[mujoco])")
    parser.add_argument("--algo", choices=["ppo", "dqn"], default="ppo")
    parser.add_argument("--case", nargs=2, action="append", metavar=("ENV", "STEPS"), required=True)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--vec-env", default="dummy", help="rlbench's --vec-env (envpool-xla: the device loop)")
    parser.add_argument("--no-normalize", action="store_true", help="drop the entries' normalize on both sides")
    args = parser.parse_args()
    # This process's CPU backend as train.py starts it for the algorithm (rlbench.run.device), before machine()
    # starts it: a backend's dispatch setting is fixed once it runs.
    select_device("cpu", -1, inline_cpu_calls=get_algo(args.algo).inline_cpu_calls)
    print(json.dumps({"machine": machine(), "cpu_flags": cpu_flags()}), flush=True)
    for env_id, steps in args.case:
        ours, theirs = [], []
        for _ in range(args.rounds):
            ours.append(rlbench_rate(args.algo, env_id, int(steps), args.vec_env, args.no_normalize))
            rate = round(ours[-1], 1)
            print(json.dumps({"system": "rlbench", "algo": args.algo, "env": env_id, "env_steps_per_s": rate}))
            theirs.append(sbx_rate(args.peer, args.algo, env_id, int(steps), args.no_normalize)["env_steps_per_s"])
            rate = theirs[-1]
            print(json.dumps({"system": "sbx", "algo": args.algo, "env": env_id, "env_steps_per_s": rate}), flush=True)
        best_ours, best_theirs = max(ours), max(theirs)
        summary = {
            "algo": args.algo,
            "env": env_id,
            "steps": int(steps),
            "rlbench": round(best_ours, 1),
            "sbx": best_theirs,
        }
        print(json.dumps({**summary, "ratio": round(best_ours / best_theirs, 2)}), flush=True)


if __name__ == "__main__":
    main()
