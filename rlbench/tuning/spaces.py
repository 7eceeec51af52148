"""Search spaces, sampled in transformed coordinates (log scales, powers of two, 1 - gamma) and
returned as hyperparameters in file spelling, ready to merge over a hyperparameter-file entry.

`to_hyperparams(algo, params)` is the converter: it maps a trial's raw parameters (what Optuna
stores) back to hyperparameters, so `--trial-id N` and the best-trial entry need no sampling code.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import optuna

NET_ARCH = {"small": [64, 64], "medium": [256, 256], "big": [400, 300]}


def suggest_sac(trial: optuna.Trial) -> None:
    """RL Zoo's SAC space: gamma via 1 - gamma (log), batch size 2^k, learning rate (log),
    train_freq = gradient_steps, tau (log), net_arch small / medium / big."""
    trial.suggest_float("one_minus_gamma", 1e-4, 0.03, log=True)
    trial.suggest_int("batch_size_pow", 5, 11)
    trial.suggest_float("learning_rate", 1e-5, 2e-3, log=True)
    trial.suggest_int("train_freq", 1, 10)
    trial.suggest_float("tau", 1e-3, 0.08, log=True)
    trial.suggest_categorical("net_arch", list(NET_ARCH))


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


def suggest_droq(trial: optuna.Trial) -> None:
    """DroQ: critic dropout rate, gradient steps (the update-to-data ratio), policy delay, critic
    learning rate, gamma."""
    trial.suggest_float("dropout_rate", 1e-3, 0.1, log=True)
    trial.suggest_int("gradient_steps", 2, 20)
    trial.suggest_int("policy_delay", 1, 20)
    trial.suggest_float("qf_learning_rate", 1e-4, 3e-3, log=True)
    trial.suggest_float("one_minus_gamma", 1e-3, 0.03, log=True)


def sac_hyperparams(p: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "gamma": 1 - p["one_minus_gamma"],
        "batch_size": 2 ** p["batch_size_pow"],
        "learning_rate": p["learning_rate"],
        "train_freq": p["train_freq"],
        "gradient_steps": p["train_freq"],
        "tau": p["tau"],
        "policy_kwargs": {"net_arch": NET_ARCH[p["net_arch"]]},
    }


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


def droq_hyperparams(p: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "gradient_steps": p["gradient_steps"],
        "policy_delay": p["policy_delay"],
        "qf_learning_rate": p["qf_learning_rate"],
        "gamma": 1 - p["one_minus_gamma"],
        "policy_kwargs": {"dropout_rate": p["dropout_rate"]},
    }


SPACES: dict[str, tuple[Callable[[optuna.Trial], None], Callable[[Mapping[str, Any]], dict[str, Any]]]] = {
    "sac": (suggest_sac, sac_hyperparams),
    "crossq": (suggest_crossq, crossq_hyperparams),
    "droq": (suggest_droq, droq_hyperparams),
}


def sample(algo: str, trial: optuna.Trial) -> dict[str, Any]:
    suggest, convert = SPACES[algo]
    suggest(trial)
    return convert(trial.params)


def to_hyperparams(algo: str, params: Mapping[str, Any]) -> dict[str, Any]:
    return SPACES[algo][1](params)
