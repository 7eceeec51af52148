"""Deterministic evaluation on a separate vector env, counted in whole episodes (as SB3's evaluate_policy)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from gymnasium.vector import VectorEnv

from rlbench.envs.make import step_vector_env


@dataclass(frozen=True)
class EvalResult:
    returns: np.ndarray  # [n_episodes]
    lengths: np.ndarray  # [n_episodes]

    @property
    def mean(self) -> float:
        return float(self.returns.mean())

    @property
    def std(self) -> float:
        return float(self.returns.std())


def evaluate(
    policy: Callable[[np.ndarray], np.ndarray],
    env: VectorEnv,
    n_episodes: int,
    seed: int | None = None,
) -> EvalResult:
    """Run `n_episodes` full episodes, spread over the envs so that no env biases toward short episodes.

    Env i runs (n_episodes + i) // n_envs episodes; extra episodes an env finishes are discarded.
    """
    seeds = None if seed is None else [seed + i for i in range(env.num_envs)]  # as env.reset(seed=seed) seeds them
    return evaluate_groups(policy, env, 1, n_episodes, seeds)[0]


def evaluate_groups(
    policy: Callable[[np.ndarray], np.ndarray],
    env: VectorEnv,
    n_groups: int,
    n_episodes: int,
    env_seeds: list[int] | None = None,
) -> list[EvalResult]:
    """`evaluate` for `n_groups` policies at once (the seeds of a run): the env's envs are split into
    n_groups equal, consecutive groups, and `policy` maps the observations of all envs to their actions.
    Each group runs `n_episodes` episodes, spread over its envs as `evaluate` spreads them. `env_seeds`
    seeds each env's first episode."""
    n_envs = env.num_envs // n_groups
    targets = np.tile([(n_episodes + i) // n_envs for i in range(n_envs)], n_groups)
    counts = np.zeros(env.num_envs, dtype=int)
    episode_return = np.zeros(env.num_envs)
    episode_length = np.zeros(env.num_envs, dtype=int)
    returns: list[list[float]] = [[] for _ in range(n_groups)]
    lengths: list[list[int]] = [[] for _ in range(n_groups)]
    obs, _ = env.reset(seed=env_seeds)
    while (counts < targets).any():
        obs, reward, terminated, truncated, _ = step_vector_env(env, policy(obs))
        episode_return += reward
        episode_length += 1
        for i in np.flatnonzero(terminated | truncated):
            if counts[i] < targets[i]:
                returns[i // n_envs].append(float(episode_return[i]))
                lengths[i // n_envs].append(int(episode_length[i]))
                counts[i] += 1
            episode_return[i] = 0.0
            episode_length[i] = 0
    return [EvalResult(returns=np.array(r), lengths=np.array(n)) for r, n in zip(returns, lengths, strict=True)]
