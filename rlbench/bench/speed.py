"""Training-throughput benchmark, side by side with SBX (`python -m rlbench.bench speed`).

Each row: steady-state env-steps/s and gradient-steps/s of a whole training loop (env stepping,
acting, inserting, fused updates), timed after a warm-up that pays for compilation. Rows use the JSON
fields of ../shared/bench/sbx_speed.py, and with `--peer PYTHON` the SBX script runs with the same
settings right after each rlbench row, in the same invocation.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

import jax

from rlbench.config import RunConfig
from rlbench.hyperparams import merge
from rlbench.loggers.base import MultiLogger
from rlbench.registry import ALGORITHMS
from rlbench.runner import train

PEER_SCRIPT = Path(__file__).resolve().parents[3] / "shared" / "bench" / "sbx_speed.py"
WARMUP_STEPS = 1000  # random phase (learning_starts), as the peer script


def bench_config(algo: str, gradient_steps: int, qf: list[int]):
    """The peer script's settings: each algorithm's defaults (DroQ and CrossQ presets included) with
    learning_starts 1000, train_freq 1, actor [256, 256] and the given critic widths."""
    spec = ALGORITHMS[algo]
    overrides = {"learning_starts": WARMUP_STEPS, "train_freq": 1, "gradient_steps": gradient_steps,
                 "policy_kwargs": {"net_arch": {"pi": [256, 256], "qf": list(qf)}}}
    if algo == "droq":
        overrides["policy_delay"] = gradient_steps
    return spec.build_config(merge(spec.preset, overrides), 1, "benchmark")


def rlbench_row(algo: str, env_id: str, n_envs: int, gradient_steps: int, steps: int, qf: list[int]) -> dict:
    """Time `steps` env steps after 1000 random steps and 100 * n_envs training steps of warm-up."""
    cfg = bench_config(algo, gradient_steps, qf)
    warmup = WARMUP_STEPS + 100 * n_envs
    marks: dict[str, float] = {}

    def on_iteration(env_steps: int, state) -> None:
        if env_steps >= warmup and "start" not in marks:
            jax.block_until_ready(state)
            marks["start"], marks["start_steps"] = time.perf_counter(), env_steps
        if env_steps >= warmup + steps:
            jax.block_until_ready(state)
            marks["end"], marks["end_steps"] = time.perf_counter(), env_steps

    run = RunConfig(env_id=env_id, n_timesteps=warmup + steps, n_envs=n_envs, eval_freq=-1, verbose=0, seed=0)
    train(run, ALGORITHMS[algo], cfg, lambda names: MultiLogger([]), on_iteration=on_iteration)
    seconds = marks["end"] - marks["start"]
    timed = marks["end_steps"] - marks["start_steps"]
    return {"system": "rlbench", "algo": algo, "env": env_id, "n_envs": n_envs, "gradient_steps": gradient_steps,
            "qf": qf, "env_steps_per_s": round(timed / seconds, 1),
            "grad_steps_per_s": round(timed / n_envs * gradient_steps / seconds, 1)}


def peer_row(python: str, algo: str, env_id: str, n_envs: int, gradient_steps: int, steps: int, qf: list[int]) -> dict:
    command = [python, str(PEER_SCRIPT), "--algo", algo, "--env", env_id, "--n-envs", str(n_envs),
               "--gradient-steps", str(gradient_steps), "--steps", str(steps), "--qf", *map(str, qf)]
    out = subprocess.run(command, check=True, capture_output=True, text=True,
                         env={**os.environ, "CUDA_VISIBLE_DEVICES": ""}).stdout
    return json.loads(out.strip().splitlines()[-1])


def machine() -> dict:
    cpu = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {"cpu": cpu, "cores": os.cpu_count(), "python": platform.python_version(), "jax": jax.__version__,
            "backend": jax.default_backend(), "devices": [str(d) for d in jax.devices()]}


DEFAULT_CASES = [  # (algo, n_envs, gradient_steps, steps timed, critic widths)
    ("sac", 1, 1, 3000, [256, 256]),
    ("sac", 8, 8, 4000, [256, 256]),
    ("droq", 1, 20, 300, [256, 256]),
    ("crossq", 1, 1, 1000, [1024, 1024]),
]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m rlbench.bench speed", description=__doc__.splitlines()[0])
    p.add_argument("--env", default="HalfCheetah-v4")
    p.add_argument("--peer", default=None, help="python of a venv with sbx-rl installed, to run SBX side by side")
    p.add_argument("--case", nargs=4, action="append", metavar=("ALGO", "N_ENVS", "GRAD_STEPS", "STEPS"),
                   help="override the cases, e.g. --case sac 1 1 3000 (critic widths from --qf)")
    p.add_argument("--qf", type=int, nargs="+", default=None, help="critic widths for --case rows")
    p.add_argument("--repeats", type=int, default=1, help="alternate rlbench/peer rows this many times")
    p.add_argument("--output", default=None, help="also write the rows as JSON lines here")
    args = p.parse_args(argv)
    if args.case:
        cases = [(a, int(e), int(g), int(s), args.qf or [1024, 1024] if a == "crossq" else args.qf or [256, 256])
                 for a, e, g, s in args.case]
    else:
        cases = DEFAULT_CASES
    rows = [{"machine": machine()}]
    print(json.dumps(rows[0]), flush=True)
    for algo, n_envs, gradient_steps, steps, qf in cases:
        for _ in range(args.repeats):
            row = rlbench_row(algo, args.env, n_envs, gradient_steps, steps, qf)
            rows.append(row)
            print(json.dumps(row), flush=True)
            if args.peer:
                row = peer_row(args.peer, algo, args.env, n_envs, gradient_steps, steps, qf)
                rows.append(row)
                print(json.dumps(row), flush=True)
    if args.output:
        Path(args.output).write_text("".join(json.dumps(r) + "\n" for r in rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
