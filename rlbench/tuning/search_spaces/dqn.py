"""DQN's and QR-DQN's Optuna search space: RL Zoo's sample_dqn_params (gamma via 1 - gamma, batch size 2^k from 4,
learning rate, train_freq and its subsampling into gradient_steps, the epsilon schedule, the target interval,
net_arch), plus n_quantiles for QR-DQN."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import optuna

from rlbench.tuning.search_spaces import SearchSpace
from rlbench.tuning.search_spaces.off_policy import NET_ARCH


def suggest_dqn(trial: optuna.Trial) -> None:
    trial.suggest_float("one_minus_gamma", 1e-4, 0.03, log=True)
    trial.suggest_int("batch_size_pow", 2, 11)
    trial.suggest_float("learning_rate", 1e-5, 2e-3, log=True)
    train_freq = trial.suggest_int("train_freq", 1, 10)
    trial.suggest_int("subsample_steps", 1, min(train_freq, 8))
    trial.suggest_float("exploration_final_eps", 0.0, 0.2)
    trial.suggest_float("exploration_fraction", 0.0, 0.5)
    trial.suggest_int("target_update_interval", 1, 20000, log=True)
    trial.suggest_categorical("net_arch", list(NET_ARCH))


def suggest_qrdqn(trial: optuna.Trial) -> None:
    suggest_dqn(trial)
    trial.suggest_int("n_quantiles", 5, 200)


def dqn_hyperparams(p: Mapping[str, Any]) -> dict[str, Any]:
    policy_kwargs: dict[str, Any] = {"net_arch": NET_ARCH[p["net_arch"]]}
    if "n_quantiles" in p:
        policy_kwargs["n_quantiles"] = p["n_quantiles"]
    return {
        "gamma": 1 - p["one_minus_gamma"],
        "batch_size": 2 ** p["batch_size_pow"],
        "learning_rate": p["learning_rate"],
        "train_freq": p["train_freq"],
        "gradient_steps": max(p["train_freq"] // p["subsample_steps"], 1),
        "exploration_final_eps": p["exploration_final_eps"],
        "exploration_fraction": p["exploration_fraction"],
        "target_update_interval": p["target_update_interval"],
        "policy_kwargs": policy_kwargs,
    }


DQN_SPACE = SearchSpace(suggest_dqn, dqn_hyperparams)
QRDQN_SPACE = SearchSpace(suggest_qrdqn, dqn_hyperparams)
