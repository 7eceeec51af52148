#!/usr/bin/env python3
"""What one env step costs when a small JAX call comes before each, as in a host loop that acts once per
step (rlbench's PPO, SBX's PPO and SAC): a MuJoCo step alone, a jitted call alone, and the two interleaved,
each the best of 3 runs of --steps iterations in this process.

    python benchmarks/jax_mujoco_interleave.py --env HalfCheetah-v4

The interleaved step costs more than the sum of its parts on the 2-core VMs measured (benchmarks/README.md),
which puts a floor under any loop that calls JAX between env steps; a numpy matrix product of the same size
in place of the JAX call is printed for comparison.
"""

from __future__ import annotations

import argparse
import json
import time
import warnings

import gymnasium as gym
import jax
import jax.numpy as jnp
import numpy as np


def best_of_three(step, n: int) -> float:
    """Microseconds per call of `step`, the best of three runs of n calls."""
    runs = []
    for _ in range(3):
        start = time.perf_counter()
        for _ in range(n):
            step()
        runs.append((time.perf_counter() - start) / n * 1e6)
    return round(min(runs), 1)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--env", default="HalfCheetah-v4")
    parser.add_argument("--steps", type=int, default=4096)
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    env = gym.make(args.env)
    env.reset(seed=0)
    obs_dim, action_dim = env.observation_space.shape[0], env.action_space.shape[0]
    actions = np.random.default_rng(0).uniform(-1, 1, (args.steps, action_dim)).astype(np.float32)
    index = [0]

    def env_step() -> None:
        _, _, terminated, truncated, _ = env.step(actions[index[0] % args.steps])
        index[0] += 1
        if terminated or truncated:
            env.reset()

    rng = np.random.default_rng(1)
    weights = [
        rng.normal(0, 0.1, shape).astype(np.float32) for shape in [(obs_dim, 256), (256, 256), (256, action_dim)]
    ]
    on_device = jax.device_put(weights)
    policy = jax.jit(lambda w, x: jnp.tanh(jnp.tanh(x @ w[0]) @ w[1]) @ w[2])
    obs = np.zeros((1, obs_dim), np.float32)

    def jax_call() -> None:
        np.asarray(policy(on_device, obs))

    def jax_call_spun() -> None:  # the result awaited by polling, the calling thread never sleeping
        out = policy(on_device, obs)
        while not out.is_ready():
            pass
        np.asarray(out)

    def numpy_call() -> None:
        np.tanh(np.tanh(obs @ weights[0]) @ weights[1]) @ weights[2]

    row = {"env": args.env, "us_env_step": best_of_three(env_step, args.steps)}
    row["us_jax_call"] = best_of_three(jax_call, args.steps)
    row["us_jax_call_then_env_step"] = best_of_three(lambda: (jax_call(), env_step()), args.steps)
    row["us_jax_call_spun"] = best_of_three(jax_call_spun, args.steps)
    row["us_jax_call_spun_then_env_step"] = best_of_three(lambda: (jax_call_spun(), env_step()), args.steps)
    row["us_numpy_call"] = best_of_three(numpy_call, args.steps)
    row["us_numpy_call_then_env_step"] = best_of_three(lambda: (numpy_call(), env_step()), args.steps)
    row["us_lost_per_step_to_interleaving"] = round(
        row["us_jax_call_then_env_step"] - row["us_jax_call"] - row["us_env_step"], 1
    )
    print(json.dumps(row))


if __name__ == "__main__":
    main()
