"""SAC's keys (RL Zoo's sac.yml), and DroQ as SAC with a preset: the Algorithm values of both."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rlbench.algos.sac.config import SACConfig
from rlbench.algos.sac.update import make_learner
from rlbench.config.algorithm import Algorithm
from rlbench.config.algorithms.shared import (
    BATCH_NORM_IS_CROSSQS,
    QUANTILES_ARE_TQCS,
    read_shared,
    read_target,
    target_hyperparams,
)
from rlbench.config.algorithms.soft import SOFT_KEYS, read_soft, soft_hyperparams

KEYS = SOFT_KEYS.extend(
    keys=("tau", "target_update_interval"),
    refused={**BATCH_NORM_IS_CROSSQS, **QUANTILES_ARE_TQCS},
)


def build_config(params: Mapping[str, Any], n_envs: int, where: str) -> SACConfig:
    """A checked SACConfig (SAC, DroQ) from the learner keys of a merged hyperparameter entry."""
    values, policy_kwargs = read_shared(params, n_envs, where, KEYS)
    return SACConfig(**values, **read_soft(params, policy_kwargs, n_envs, where), **read_target(params))


def config_to_hyperparams(cfg: SACConfig) -> dict[str, Any]:
    """The inverse of build_config, in the file format: what config.yml stores, sorted."""
    return dict(sorted((soft_hyperparams(cfg) | target_hyperparams(cfg)).items()))


# DroQ (Hiraoka et al. 2022, arXiv:2110.02034): SAC with a dropout + layer-norm critic and a high
# update-to-data ratio. Keys use the hyperparameter files' format, so files and -params override them.
DROQ_PRESET: dict[str, Any] = {
    "gradient_steps": 20,
    "policy_delay": 20,
    "learning_starts": 10_000,
    "policy_kwargs": {"dropout_rate": 0.01, "layer_norm": True},
}

SAC = Algorithm("sac", KEYS, build_config, config_to_hyperparams, make_learner)
DROQ = Algorithm("droq", KEYS, build_config, config_to_hyperparams, make_learner, preset=DROQ_PRESET)
