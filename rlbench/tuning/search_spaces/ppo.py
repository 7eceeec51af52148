"""PPO's and A2C's Optuna search spaces: RL Zoo 2.9.2's (hyperparams_opt.sample_ppo_params and
sample_a2c_params), sampled in the same transformed coordinates (powers of two, 1 - gamma, 1 - gae_lambda, log
scales), so a study's parameters read as RL Zoo's do."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import optuna

from rlbench.tuning.search_spaces import SearchSpace

NET_ARCH = {"tiny": [64], "small": [64, 64], "medium": [256, 256]}


def suggest_shared(trial: optuna.Trial) -> None:
    trial.suggest_float("one_minus_gamma", 1e-4, 0.03, log=True)
    trial.suggest_float("one_minus_gae_lambda", 1e-4, 0.1, log=True)
    trial.suggest_float("learning_rate", 1e-5, 2e-3, log=True)
    trial.suggest_float("ent_coef", 1e-8, 0.1, log=True)
    trial.suggest_float("max_grad_norm", 0.3, 2.0)


def shared_hyperparams(p: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "gamma": 1 - p["one_minus_gamma"],
        "gae_lambda": 1 - p["one_minus_gae_lambda"],
        "learning_rate": p["learning_rate"],
        "ent_coef": p["ent_coef"],
        "max_grad_norm": p["max_grad_norm"],
        "policy_kwargs": {
            "net_arch": {"pi": NET_ARCH[p["net_arch"]], "vf": NET_ARCH[p["net_arch"]]},
            "activation_fn": p["activation_fn"],
        },
    }


def suggest_ppo(trial: optuna.Trial) -> None:
    trial.suggest_int("batch_size_pow", 2, 10)
    trial.suggest_int("n_steps_pow", 5, 12)
    suggest_shared(trial)
    trial.suggest_categorical("clip_range", [0.1, 0.2, 0.3, 0.4])
    trial.suggest_categorical("n_epochs", [1, 5, 10, 20])
    trial.suggest_categorical("net_arch", ["tiny", "small", "medium"])
    trial.suggest_categorical("activation_fn", ["tanh", "relu"])


def ppo_hyperparams(p: Mapping[str, Any]) -> dict[str, Any]:
    # RL Zoo passes a batch_size above the rollout on to SB3, which then takes the whole rollout as its one
    # minibatch (RL Zoo's converter has the cap as a TODO); rlbench refuses that batch_size, so the space caps
    # it at n_steps, which fits any n_envs, instead of failing about a third of its trials.
    return shared_hyperparams(p) | {
        "batch_size": 2 ** min(p["batch_size_pow"], p["n_steps_pow"]),
        "n_steps": 2 ** p["n_steps_pow"],
        "clip_range": p["clip_range"],
        "n_epochs": p["n_epochs"],
    }


def suggest_a2c(trial: optuna.Trial) -> None:
    trial.suggest_categorical("n_steps", [32, 64, 128, 256, 512, 1024, 2048])
    suggest_shared(trial)
    trial.suggest_categorical("net_arch", ["small", "medium"])
    trial.suggest_categorical("activation_fn", ["tanh", "relu"])


def a2c_hyperparams(p: Mapping[str, Any]) -> dict[str, Any]:
    return shared_hyperparams(p) | {"n_steps": p["n_steps"]}


PPO_SPACE = SearchSpace(suggest_ppo, ppo_hyperparams)
A2C_SPACE = SearchSpace(suggest_a2c, a2c_hyperparams)
