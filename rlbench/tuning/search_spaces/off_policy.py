"""RL Zoo's search space of its off-policy learners, SAC's, which TQC and TD3 extend; sampled in
transformed coordinates (log scales, powers of two, 1 - gamma)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import optuna

NET_ARCH = {"small": [64, 64], "medium": [256, 256], "big": [400, 300]}


def suggest_off_policy(trial: optuna.Trial) -> None:
    """RL Zoo's SAC space, the base of its TQC and TD3 spaces: gamma via 1 - gamma (log), batch size 2^k,
    learning rate (log), train_freq = gradient_steps, tau (log), net_arch small / medium / big."""
    trial.suggest_float("one_minus_gamma", 1e-4, 0.03, log=True)
    trial.suggest_int("batch_size_pow", 5, 11)
    trial.suggest_float("learning_rate", 1e-5, 2e-3, log=True)
    trial.suggest_int("train_freq", 1, 10)
    trial.suggest_float("tau", 1e-3, 0.08, log=True)
    trial.suggest_categorical("net_arch", list(NET_ARCH))


def off_policy_hyperparams(p: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "gamma": 1 - p["one_minus_gamma"],
        "batch_size": 2 ** p["batch_size_pow"],
        "learning_rate": p["learning_rate"],
        "train_freq": p["train_freq"],
        "gradient_steps": p["train_freq"],
        "tau": p["tau"],
        "policy_kwargs": {"net_arch": NET_ARCH[p["net_arch"]]},
    }
