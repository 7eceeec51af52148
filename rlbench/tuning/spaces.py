"""Search spaces, sampled in transformed coordinates (log scales, powers of two, 1 - gamma) and
returned as hyperparameters in the file format, ready to merge over a hyperparameter-file entry.

`to_hyperparams(algo, params)` is the converter: it maps a trial's raw parameters (what Optuna
stores) back to hyperparameters, so `--trial-id N` and the best-trial entry need no sampling code.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import optuna

from rlbench.tuning.search_spaces import SearchSpace
from rlbench.tuning.search_spaces.crossq import CROSSQ_SPACE
from rlbench.tuning.search_spaces.dqn import DQN_SPACE, QRDQN_SPACE
from rlbench.tuning.search_spaces.ppo import A2C_SPACE, PPO_SPACE
from rlbench.tuning.search_spaces.sac import DROQ_SPACE, SAC_SPACE
from rlbench.tuning.search_spaces.td3 import TD3_SPACE
from rlbench.tuning.search_spaces.tqc import TQC_SPACE

# RL Zoo's space of each algorithm, by its --algo name (every registered algorithm has one: tests/unit/test_tuning.py).
SPACES: dict[str, SearchSpace] = {
    "sac": SAC_SPACE,
    "droq": DROQ_SPACE,
    "crossq": CROSSQ_SPACE,
    "tqc": TQC_SPACE,
    "td3": TD3_SPACE,
    "ddpg": TD3_SPACE,  # RL Zoo samples DDPG in TD3's space
    "ppo": PPO_SPACE,
    "a2c": A2C_SPACE,
    "dqn": DQN_SPACE,
    "qrdqn": QRDQN_SPACE,
}


def sample(algo: str, trial: optuna.Trial) -> dict[str, Any]:
    suggest, convert = SPACES[algo]
    suggest(trial)
    return convert(trial.params)


def to_hyperparams(algo: str, params: Mapping[str, Any]) -> dict[str, Any]:
    return SPACES[algo][1](params)
