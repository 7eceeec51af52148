"""TQC's keys (RL Zoo's tqc.yml) and its Algorithm value."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rlbench.algos.tqc.config import TQCConfig
from rlbench.algos.tqc.update import make_learner
from rlbench.config.algorithm import Algorithm
from rlbench.config.algorithms.shared import (
    BATCH_NORM_IS_CROSSQS,
    quantile_hyperparams,
    read_quantiles,
    read_shared,
    read_target,
    target_hyperparams,
)
from rlbench.config.algorithms.soft import SOFT_KEYS, read_soft, soft_hyperparams

KEYS = SOFT_KEYS.extend(
    keys=("tau", "target_update_interval", "top_quantiles_to_drop_per_net"),
    policy_kwargs=("n_quantiles",),
    refused=BATCH_NORM_IS_CROSSQS,
)


def build_config(params: Mapping[str, Any], n_envs: int, where: str) -> TQCConfig:
    """A checked TQCConfig from the learner keys of a merged hyperparameter entry."""
    values, policy_kwargs = read_shared(params, n_envs, where, KEYS)
    values |= read_soft(params, policy_kwargs, n_envs, where)
    return TQCConfig(**values, **read_target(params), quantiles=read_quantiles(params, policy_kwargs))


def config_to_hyperparams(cfg: TQCConfig) -> dict[str, Any]:
    """The inverse of build_config, in the file format: what config.yml stores, sorted."""
    return dict(sorted(quantile_hyperparams(soft_hyperparams(cfg) | target_hyperparams(cfg), cfg.quantiles).items()))


TQC = Algorithm("tqc", KEYS, build_config, config_to_hyperparams, make_learner)
