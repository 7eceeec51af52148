"""EnvPool's envs against gymnasium's of the same id, and their throughput on this machine (issue 46).

1. Lockstep from one initial state: EnvPool's env is reset, gymnasium's is put in the state that observation
   shows (Pendulum's angle and velocity; a MuJoCo env's qpos without x, which no dynamics read, and qvel), then
   both take the same uniform random actions until an episode ends. Prints the largest observation and reward
   differences over the first 10 and 50 steps and over the episode, and whether both end on the same step in
   the same way.
2. Distributions over many random-action episodes, each env seeded its own way: mean return (standard error),
   mean length, termination rate.
3. Throughput: 8 HalfCheetah-v4 envs stepped with random actions through rlbench's vector envs: EnvPool's pool,
   gymnasium's subprocess workers and gymnasium's in-process envs.

4. --n-seeds' layout: 4 seeds x 2 HalfCheetah-v4 envs as one pool of 8 (what rlbench builds) or as four pools of 2
   stepped one after another (a pool per seed).

    python benchmarks/envpool_vs_gymnasium.py [--episodes 100] [--throughput-steps 5000] [--sections 3 4]
"""

from __future__ import annotations

import argparse
import time
import warnings
from collections.abc import Callable
from pathlib import Path

import envpool
import gymnasium as gym
import numpy as np

from rlbench.envs.envpool_vector import EnvPoolVectorEnv
from rlbench.envs.make import make_vector_env
from rlbench.report.returns import machine_line

SetState = Callable[[gym.Env, np.ndarray], None]


def pendulum_state(env: gym.Env, obs: np.ndarray) -> None:
    env.unwrapped.state = np.array([np.arctan2(obs[1], obs[0]), obs[2]], np.float64)  # type: ignore[attr-defined]


def mujoco_state(n_qpos: int) -> SetState:
    def set_state(env: gym.Env, obs: np.ndarray) -> None:
        qpos = np.concatenate([[0.0], obs[: n_qpos - 1]])  # x is not observed, and no dynamics depend on it
        env.unwrapped.set_state(qpos, obs[n_qpos - 1 : 2 * n_qpos - 1])  # type: ignore[attr-defined]

    return set_state


TASKS: dict[str, SetState] = {
    "Pendulum-v1": pendulum_state,
    "HalfCheetah-v4": mujoco_state(9),
    "Hopper-v4": mujoco_state(6),
}


def lockstep(task: str, set_state: SetState, seed: int) -> dict[str, float | str]:
    rng = np.random.default_rng(seed)
    pool, env = envpool.make_gymnasium(task, num_envs=1, seed=[seed]), gym.make(task)
    pool_obs, _ = pool.reset()
    env.reset(seed=seed)
    set_state(env, pool_obs[0])
    obs_diff, reward_diff, steps, ending = [], [], 0, "-"
    while True:
        action = rng.uniform(env.action_space.low, env.action_space.high).astype(env.action_space.dtype)
        obs, reward, terminated, truncated, _ = pool.step(action[None])
        gym_obs, gym_reward, gym_terminated, gym_truncated, _ = env.step(action)
        steps += 1
        obs_diff.append(float(np.abs(obs[0] - gym_obs).max()))
        reward_diff.append(abs(float(reward[0]) - float(gym_reward)))
        pool_end, gym_end = (bool(terminated[0]), bool(truncated[0])), (gym_terminated, gym_truncated)
        if any(pool_end) or any(gym_end):
            same = pool_end == gym_end
            ending = ("terminated" if gym_terminated else "truncated") if same else f"differ: {pool_end} {gym_end}"
            break
    env.close()
    return {
        "steps": steps,
        "end": ending,
        "obs_10": max(obs_diff[:10]),
        "obs_50": max(obs_diff[:50]),
        "obs_all": max(obs_diff),
        "reward_all": max(reward_diff),
    }


def episode_stats(task: str, n: int, source: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """n random-action episodes, each on a new seed."""
    rng = np.random.default_rng(1)
    returns, lengths, terminations = [], [], []
    for episode in range(n):
        if source == "envpool":
            env = envpool.make_gymnasium(task, num_envs=1, seed=[1000 + episode])
            env.reset()
            space = env.action_space
        else:
            env = gym.make(task)
            env.reset(seed=1000 + episode)
            space = env.action_space
        total, length = 0.0, 0
        while True:
            action = rng.uniform(space.low, space.high).astype(space.dtype)
            if source == "envpool":
                _, reward, terminated, truncated, _ = env.step(action[None])
                reward, terminated, truncated = float(reward[0]), bool(terminated[0]), bool(truncated[0])
            else:
                _, reward, terminated, truncated, _ = env.step(action)
            total += float(reward)
            length += 1
            if terminated or truncated:
                break
        env.close()
        returns.append(total)
        lengths.append(length)
        terminations.append(terminated)
    return np.array(returns), np.array(lengths), np.array(terminations)


def throughput(vec_env: str, n_envs: int, steps: int) -> float:
    env = make_vector_env("HalfCheetah-v4", n_envs, vec_env, {})  # type: ignore[arg-type]
    env.reset(seed=0)
    rng = np.random.default_rng(0)
    actions = rng.uniform(-1, 1, (steps, n_envs, 6)).astype(np.float32)
    for action in actions[:100]:  # warm-up: workers started, caches filled
        env.step(action)
    start = time.perf_counter()
    for action in actions:
        env.step(action)
    elapsed = time.perf_counter() - start
    env.close()
    return steps * n_envs / elapsed


def pools_throughput(n_pools: int, envs_per_pool: int, steps: int) -> float:
    pools = [EnvPoolVectorEnv("envpool:HalfCheetah-v4", envs_per_pool, {}) for _ in range(n_pools)]
    for i, pool in enumerate(pools):
        pool.reset(seed=i * envs_per_pool)
    actions = np.random.default_rng(0).uniform(-1, 1, (steps, n_pools, envs_per_pool, 6)).astype(np.float32)
    start = time.perf_counter()
    for action in actions:
        for pool, pool_action in zip(pools, action, strict=True):
            pool.step(pool_action)
    elapsed = time.perf_counter() - start
    for pool in pools:
        pool.close()
    return steps * n_pools * envs_per_pool / elapsed


def cpu_flags() -> str:
    flags = next((line for line in Path("/proc/cpuinfo").read_text().splitlines() if line.startswith("flags")), "")
    return " ".join(f for f in ("avx2", "avx512f", "avx512_bf16", "amx_bf16") if f" {f}" in flags) or "none"


def lockstep_section(args: argparse.Namespace) -> None:
    print("\n## 1. Lockstep from EnvPool's initial state, same random actions (largest |difference|)")
    print("| env | seed | steps | end | obs, steps 1-10 | obs, 1-50 | obs, episode | reward, episode |")
    print("|---|---|---|---|---|---|---|---|")
    for task, set_state in TASKS.items():
        for seed in range(args.lockstep_seeds):
            r = lockstep(task, set_state, seed)
            print(
                f"| {task} | {seed} | {r['steps']} | {r['end']} | {r['obs_10']:.1e} | {r['obs_50']:.1e} | "
                f"{r['obs_all']:.1e} | {r['reward_all']:.1e} |"
            )


def distributions_section(args: argparse.Namespace) -> None:
    print(f"\n## 2. {args.episodes} random-action episodes each")
    print("| env | source | return mean (s.e.) | length mean | terminated |")
    print("|---|---|---|---|---|")
    for task in TASKS:
        for source in ("envpool", "gymnasium"):
            returns, lengths, terminated = episode_stats(task, args.episodes, source)
            se = returns.std(ddof=1) / np.sqrt(len(returns))
            stats = f"{returns.mean():.1f} ({se:.1f}) | {lengths.mean():.1f} | {terminated.mean():.2f}"
            print(f"| {task} | {source} | {stats} |")


def throughput_section(args: argparse.Namespace) -> None:
    print(f"\n## 3. Env steps/s, 8 HalfCheetah-v4 envs, random actions, {args.throughput_steps} vector steps")
    print("| vector env | env steps/s |")
    print("|---|---|")
    for vec_env in ("envpool", "subproc", "dummy"):
        print(f"| {vec_env} | {throughput(vec_env, 8, args.throughput_steps):,.0f} |")


def seed_layout_section(args: argparse.Namespace) -> None:
    print(f"\n## 4. Env steps/s, 4 seeds x 2 HalfCheetah-v4 envs, {args.throughput_steps} vector steps")
    print("| layout | env steps/s |")
    print("|---|---|")
    for name, (n_pools, per_pool) in {"one pool of 8": (1, 8), "four pools of 2": (4, 2)}.items():
        print(f"| {name} | {pools_throughput(n_pools, per_pool, args.throughput_steps):,.0f} |")


SECTIONS = {1: lockstep_section, 2: distributions_section, 3: throughput_section, 4: seed_layout_section}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=100)
    parser.add_argument("--lockstep-seeds", type=int, default=5)
    parser.add_argument("--throughput-steps", type=int, default=5000)
    parser.add_argument("--sections", type=int, nargs="+", default=sorted(SECTIONS), choices=sorted(SECTIONS))
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    print(f"# {machine_line()}; CPU flags: {cpu_flags()}; EnvPool {envpool.__version__}, gymnasium {gym.__version__}")
    for section in args.sections:
        SECTIONS[section](args)


if __name__ == "__main__":
    main()
