"""The algorithms rlbench offers, by command-line name. Each algorithm folder (rlbench/algos/<algo>/)
defines its `Algorithm`: config type and keys, learner, preset and search space."""

from __future__ import annotations

import difflib

from rlbench.algos.common.algorithm import Algorithm, with_foreign_keys
from rlbench.algos.crossq.algorithm import CROSSQ
from rlbench.algos.ppo.algorithm import A2C, PPO
from rlbench.algos.sac.algorithm import DROQ, SAC
from rlbench.algos.td3.algorithm import DDPG, TD3
from rlbench.algos.tqc.algorithm import TQC
from rlbench.errors import ConfigError

ALGORITHMS: dict[str, Algorithm] = with_foreign_keys((SAC, DROQ, CROSSQ, TQC, TD3, DDPG, PPO, A2C))


def acting_in(space: str) -> list[str]:
    """The algorithms that act in an action space of this kind ("Box", "Discrete")."""
    return [name for name, algo in ALGORITHMS.items() if space in algo.action_spaces]


def get_algo(name: str) -> Algorithm:
    if name in ALGORITHMS:
        return ALGORITHMS[name]
    close = difflib.get_close_matches(name, list(ALGORITHMS), n=1)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    raise ConfigError(f"unknown algorithm {name!r}{hint} (valid: {', '.join(ALGORITHMS)})")
