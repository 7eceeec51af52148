"""Optuna search spaces of SAC (RL Zoo's: rlbench/algos/common/search_space.py) and DroQ, sampled in
transformed coordinates (log scales, powers of two, 1 - gamma)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import optuna

from rlbench.tuning.search_spaces import SearchSpace
from rlbench.tuning.search_spaces.off_policy import off_policy_hyperparams, suggest_off_policy


def suggest_droq(trial: optuna.Trial) -> None:
    """DroQ: critic dropout rate, gradient steps (the update-to-data ratio), policy delay, critic
    learning rate, gamma."""
    trial.suggest_float("dropout_rate", 1e-3, 0.1, log=True)
    trial.suggest_int("gradient_steps", 2, 20)
    trial.suggest_int("policy_delay", 1, 20)
    trial.suggest_float("qf_learning_rate", 1e-4, 3e-3, log=True)
    trial.suggest_float("one_minus_gamma", 1e-3, 0.03, log=True)


def droq_hyperparams(p: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "gradient_steps": p["gradient_steps"],
        "policy_delay": p["policy_delay"],
        "qf_learning_rate": p["qf_learning_rate"],
        "gamma": 1 - p["one_minus_gamma"],
        "policy_kwargs": {"dropout_rate": p["dropout_rate"]},
    }


SAC_SPACE = SearchSpace(suggest_off_policy, off_policy_hyperparams)
DROQ_SPACE = SearchSpace(suggest_droq, droq_hyperparams)
