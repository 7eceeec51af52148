"""TD3's (and DDPG's) Optuna search space: RL Zoo's, its off-policy space (gamma, batch size, learning
rate, train_freq = gradient_steps, tau, net_arch) plus the exploration noise's type and std."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import optuna

from rlbench.tuning.search_spaces import SearchSpace
from rlbench.tuning.search_spaces.off_policy import off_policy_hyperparams, suggest_off_policy

NOISE_TYPES = ("ornstein-uhlenbeck", "normal", None)  # RL Zoo's choices (None: no noise)


def suggest_td3(trial: optuna.Trial) -> None:
    suggest_off_policy(trial)
    trial.suggest_categorical("noise_type", list(NOISE_TYPES))
    trial.suggest_float("noise_std", 0.0, 0.5)


def td3_hyperparams(p: Mapping[str, Any]) -> dict[str, Any]:
    out = off_policy_hyperparams(p) | {"noise_type": p["noise_type"]}
    if p["noise_type"] is not None:
        out["noise_std"] = p["noise_std"]
    return out


TD3_SPACE = SearchSpace(suggest_td3, td3_hyperparams)
