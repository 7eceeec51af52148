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
    n_envs = env.num_envs
    targets = np.array([(n_episodes + i) // n_envs for i in range(n_envs)])
    counts = np.zeros(n_envs, dtype=int)
    episode_return = np.zeros(n_envs)
    episode_length = np.zeros(n_envs, dtype=int)
    returns: list[float] = []
    lengths: list[int] = []
    obs, _ = env.reset(seed=seed)
    while (counts < targets).any():
        obs, reward, terminated, truncated, _ = step_vector_env(env, policy(obs))
        episode_return += reward
        episode_length += 1
        for i in np.flatnonzero(terminated | truncated):
            if counts[i] < targets[i]:
                returns.append(float(episode_return[i]))
                lengths.append(int(episode_length[i]))
                counts[i] += 1
            episode_return[i] = 0.0
            episode_length[i] = 0
    return EvalResult(returns=np.array(returns), lengths=np.array(lengths))
