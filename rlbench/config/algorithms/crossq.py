"""CrossQ's keys (SBX's CrossQ, as RL Zoo's crossq.yml writes them), its preset and its Algorithm value.

BatchRenorm's settings are policy_kwargs as in SBX; with `n_quantiles` in policy_kwargs the critics are
TQC's quantile critics (CrossQ + TQC).
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from dataclasses import replace
from typing import Any, TypedDict

from rlbench.algos.crossq.config import CrossQConfig
from rlbench.algos.crossq.update import make_learner
from rlbench.config.algorithm import Algorithm
from rlbench.config.algorithms.shared import (
    BATCH_NORM_KEYS,
    boolean,
    quantile_hyperparams,
    read_quantiles,
    read_shared,
)
from rlbench.config.algorithms.soft import SOFT_KEYS, read_soft, soft_hyperparams
from rlbench.config.values import number
from rlbench.errors import ConfigError
from rlbench.networks.mlp import NetworkConfig

KEYS = SOFT_KEYS.extend(
    keys=("top_quantiles_to_drop_per_net",),
    policy_kwargs=(*BATCH_NORM_KEYS, "n_quantiles"),
    refused={
        key: f"CrossQ has no target network, so {key} does not apply" for key in ("tau", "target_update_interval")
    },
)

# CrossQ's defaults as SBX's CrossQ (critic [1024, 1024]; the paper's is [2048, 2048]).
CROSSQ_PRESET: dict[str, Any] = {
    "learning_rate": 1e-3,
    "policy_delay": 3,
    "policy_kwargs": {
        "net_arch": {"pi": [256, 256], "qf": [1024, 1024]},
        "batch_norm": True,
        "batch_norm_actor": True,
        "batch_norm_momentum": 0.99,
        "renorm_warmup_steps": 100_000,
        "optimizer_kwargs": {"b1": 0.5},
    },
}


class _BatchRenorm(TypedDict):
    """NetworkConfig's BatchRenorm settings, shared by the actor and the critic."""

    batch_norm_momentum: float
    renorm_warmup_steps: int


def with_batch_norm(
    actor: NetworkConfig, critic: NetworkConfig, kwargs: Mapping[str, Any]
) -> tuple[NetworkConfig, NetworkConfig]:
    """(actor, critic) with BatchRenorm as policy_kwargs set it (off unless asked, as SBX's policy)."""
    momentum = kwargs.get("batch_norm_momentum", NetworkConfig.batch_norm_momentum)
    warmup = kwargs.get("renorm_warmup_steps", NetworkConfig.renorm_warmup_steps)
    norm: _BatchRenorm = {
        "batch_norm_momentum": number(
            {"batch_norm_momentum": momentum}, "batch_norm_momentum", float, 0, 1, high_open=True
        ),
        "renorm_warmup_steps": number({"renorm_warmup_steps": warmup}, "renorm_warmup_steps", int, 0),
    }
    critic_batch_norm = boolean(kwargs, "batch_norm", False)
    if critic_batch_norm and critic.layer_norm:
        warnings.warn(
            "policy_kwargs: layer_norm together with batch_norm normalises twice; SBX advises "
            "layer_norm=False with CrossQ",
            stacklevel=3,
        )
    return (
        replace(actor, batch_norm=boolean(kwargs, "batch_norm_actor", False), **norm),
        replace(critic, batch_norm=critic_batch_norm, **norm),
    )


def build_config(params: Mapping[str, Any], n_envs: int, where: str) -> CrossQConfig:
    """A checked CrossQConfig from the learner keys of a merged hyperparameter entry."""
    values, policy_kwargs = read_shared(params, n_envs, where, KEYS)
    values |= read_soft(params, policy_kwargs, n_envs, where)
    values["actor"], values["critic"] = with_batch_norm(values["actor"], values["critic"], policy_kwargs)
    quantiles = None
    if "n_quantiles" in policy_kwargs:
        quantiles = read_quantiles(params, policy_kwargs)
    elif "top_quantiles_to_drop_per_net" in params:
        raise ConfigError(
            f"top_quantiles_to_drop_per_net: CrossQ's critics are quantile critics only with "
            f"policy_kwargs n_quantiles set (CrossQ + TQC); set n_quantiles or remove it (from {where})"
        )
    return CrossQConfig(**values, quantiles=quantiles)


def config_to_hyperparams(cfg: CrossQConfig) -> dict[str, Any]:
    """The inverse of build_config, in the file format: what config.yml stores, sorted."""
    out = soft_hyperparams(cfg)
    out["policy_kwargs"] |= {
        "batch_norm": cfg.critic.batch_norm,
        "batch_norm_actor": cfg.actor.batch_norm,
        "batch_norm_momentum": cfg.critic.batch_norm_momentum,
        "renorm_warmup_steps": cfg.critic.renorm_warmup_steps,
    }
    if cfg.quantiles is not None:
        out = quantile_hyperparams(out, cfg.quantiles)
    return dict(sorted(out.items()))


CROSSQ = Algorithm("crossq", KEYS, build_config, config_to_hyperparams, make_learner, preset=CROSSQ_PRESET)
