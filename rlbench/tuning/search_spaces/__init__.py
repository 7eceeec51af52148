"""RL Zoo's Optuna search spaces, one module per learner family, joined to the algorithms by name in
rlbench.tuning.spaces (the learners in rlbench/algos know nothing of Optuna)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

import optuna


class SearchSpace(NamedTuple):
    """An Optuna search space: `suggest(trial)` samples raw parameters (log scales, powers of two, ...)
    and `to_hyperparams(trial.params)` turns them into hyperparameters in the file format, so a stored
    trial is rebuilt without sampling again."""

    suggest: Callable[[optuna.Trial], None]
    to_hyperparams: Callable[[Mapping[str, Any]], dict[str, Any]]
