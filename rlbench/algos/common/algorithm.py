"""What an algorithm folder gives the rest of rlbench: one `Algorithm` value, listed in rlbench/algos/registry.py."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

from rlbench.algos.common.config import ActorCriticConfig
from rlbench.algos.common.learner import Learner
from rlbench.types import EnvSpec


class SearchSpace(NamedTuple):
    """An Optuna search space: `suggest(trial)` samples raw parameters (log scales, powers of two, ...)
    and `to_hyperparams(trial.params)` turns them into hyperparameters in file spelling, so a stored
    trial is rebuilt without sampling again."""

    suggest: Callable[[Any], None]
    to_hyperparams: Callable[[Mapping[str, Any]], dict[str, Any]]


@dataclass(frozen=True)
class Algorithm:
    name: str  # the --algo value
    preset: Mapping[str, Any]  # hyperparameters (file spelling) applied below the file entry
    build_config: Callable[[Mapping[str, Any], int, str], ActorCriticConfig]  # (learner keys, n_envs, where)
    config_to_hyperparams: Callable[[Any], dict[str, Any]]  # its inverse, in file spelling
    make_learner: Callable[[Any, EnvSpec], Learner[Any]]
    search_space: SearchSpace
