"""Episodes an env reports itself, for envs whose agent episodes are not the episodes a user scores.

Atari's episodic life ends the agent's episode at every life lost, while RL Zoo's Monitor files, its
`rollout/ep_rew_mean` and its evaluations count games at their raw score: SB3's Monitor sits under the
AtariWrapper. rlbench's AtariWrapper reports each game in the info of the step that ends it (info["episode"] =
{"r": score, "l": frames}: rlbench.envs.atari.GameMonitor); a wrapper class that does so says
`reports_episodes = True`, and the loops, evaluations and enjoy.py then count the reported episodes instead of the
agent's. With SAME_STEP autoreset the vector env moves an ending step's info under info["final_info"].
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, NamedTuple

import gymnasium as gym
import numpy as np

from rlbench.envs.wrappers import EnvWrapper


class ReportedEpisodes(NamedTuple):
    """The episodes a vector step's envs reported: [n_envs] each (returns and lengths where `ended`)."""

    ended: np.ndarray  # bool
    returns: np.ndarray  # float64
    lengths: np.ndarray  # int64


def reports_episodes(wrappers: Iterable[EnvWrapper]) -> bool:
    """Whether envs built with these wrappers report their own episodes."""
    return any(getattr(wrapper.wrapper_class, "reports_episodes", False) for wrapper in wrappers)


def env_reports_episodes(env: gym.Env[Any, Any]) -> bool:
    """Whether one env reports its own episodes: one of its wrappers says so, or the env itself (EnvPool's)."""
    while isinstance(env, gym.Wrapper):
        if getattr(type(env), "reports_episodes", False):
            return True
        env = env.env
    return bool(getattr(env, "reports_episodes", False))


def reported_episodes(infos: Mapping[str, Any], n_envs: int) -> ReportedEpisodes:
    """The episodes reported in a vector step's infos (none ended where nothing was reported)."""
    final_info = infos.get("final_info", {})
    episode = final_info.get("episode")
    if episode is None:
        return ReportedEpisodes(np.zeros(n_envs, bool), np.zeros(n_envs), np.zeros(n_envs, np.int64))
    ended = np.asarray(final_info["_episode"], bool)
    returns = np.where(ended, np.asarray(episode["r"], np.float64), 0.0)
    return ReportedEpisodes(ended, returns, np.where(ended, np.asarray(episode["l"], np.int64), 0))
