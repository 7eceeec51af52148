"""Search spaces, sampled in transformed coordinates (log scales, powers of two, 1 - gamma) and
returned as hyperparameters in file spelling, ready to merge over a hyperparameter-file entry.

`to_hyperparams(algo, params)` is the converter: it maps a trial's raw parameters (what Optuna
stores) back to hyperparameters, so `--trial-id N` and the best-trial entry need no sampling code.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import optuna

from rlbench.algos.common.algorithm import SearchSpace
from rlbench.algos.registry import ALGORITHMS

# Each algorithm's space lives in its folder (rlbench/algos/<algo>/search_space.py).
SPACES: dict[str, SearchSpace] = {name: algo.search_space for name, algo in ALGORITHMS.items()}


def sample(algo: str, trial: optuna.Trial) -> dict[str, Any]:
    suggest, convert = SPACES[algo]
    suggest(trial)
    return convert(trial.params)


def to_hyperparams(algo: str, params: Mapping[str, Any]) -> dict[str, Any]:
    return SPACES[algo][1](params)
