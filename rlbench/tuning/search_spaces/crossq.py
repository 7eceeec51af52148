"""CrossQ's Optuna search space."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import optuna

from rlbench.tuning.search_spaces import SearchSpace


def suggest_crossq(trial: optuna.Trial) -> None:
    """CrossQ: learning rate, policy delay, actor and critic widths (critic 256-2048), BatchRenorm
    momentum and warm-up, Adam b1, gamma."""
    trial.suggest_float("learning_rate", 1e-4, 3e-3, log=True)
    trial.suggest_int("policy_delay", 1, 5)
    trial.suggest_categorical("pi_width", [256, 512])
    trial.suggest_int("qf_width_pow", 8, 11)  # 256 .. 2048
    trial.suggest_float("one_minus_momentum", 1e-3, 0.1, log=True)
    trial.suggest_int("renorm_warmup_steps", 1_000, 100_000, log=True)
    trial.suggest_float("adam_b1", 0.0, 0.9)
    trial.suggest_float("one_minus_gamma", 1e-3, 0.03, log=True)


def crossq_hyperparams(p: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "learning_rate": p["learning_rate"],
        "policy_delay": p["policy_delay"],
        "gamma": 1 - p["one_minus_gamma"],
        "policy_kwargs": {
            "net_arch": {"pi": [p["pi_width"]] * 2, "qf": [2 ** p["qf_width_pow"]] * 2},
            "batch_norm_momentum": 1 - p["one_minus_momentum"],
            "renorm_warmup_steps": p["renorm_warmup_steps"],
            "optimizer_kwargs": {"b1": p["adam_b1"]},
        },
    }


CROSSQ_SPACE = SearchSpace(suggest_crossq, crossq_hyperparams)
