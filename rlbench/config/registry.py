"""The algorithms rlbench offers, by command-line name. Each is an `Algorithm` (rlbench/config/algorithm.py)
defined beside its keys in rlbench/config/algorithms/<algo>.py: its math in rlbench/algos/<algo>/, its
Optuna space in rlbench/tuning/search_spaces/, joined by name."""

from __future__ import annotations

import difflib

from rlbench.config.algorithm import Algorithm, with_foreign_keys
from rlbench.config.algorithms.crossq import CROSSQ
from rlbench.config.algorithms.dqn import DQN, QRDQN
from rlbench.config.algorithms.ppo import A2C, PPO
from rlbench.config.algorithms.sac import DROQ, SAC
from rlbench.config.algorithms.td3 import DDPG, TD3
from rlbench.config.algorithms.tqc import TQC
from rlbench.errors import ConfigError

ALGORITHMS: dict[str, Algorithm] = with_foreign_keys((SAC, DROQ, CROSSQ, TQC, TD3, DDPG, PPO, A2C, DQN, QRDQN))


def acting_in(space: str) -> list[str]:
    """The algorithms that act in an action space of this kind ("Box", "Discrete")."""
    return [name for name, algo in ALGORITHMS.items() if space in algo.action_spaces]


def reading_images() -> list[str]:
    """The algorithms that read image observations."""
    return [name for name, algo in ALGORITHMS.items() if algo.reads_images]


def get_algo(name: str) -> Algorithm:
    if name in ALGORITHMS:
        return ALGORITHMS[name]
    close = difflib.get_close_matches(name, list(ALGORITHMS), n=1)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    raise ConfigError(f"unknown algorithm {name!r}{hint} (valid: {', '.join(ALGORITHMS)})")
