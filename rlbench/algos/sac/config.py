"""SAC's typed, frozen hyperparameters (defaults as SBX's SAC), its keys, and the DroQ preset."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from rlbench.algos.common.config import BATCH_NORM_IS_CROSSQS, QUANTILES_ARE_TQCS, read_shared
from rlbench.algos.common.soft_config import SOFT_KEYS, SoftConfig, read_soft, soft_hyperparams
from rlbench.algos.common.targets import read_target, target_hyperparams


@dataclass(frozen=True, kw_only=True)
class SACConfig(SoftConfig):
    tau: float = 0.005  # Polyak rate of the target critics
    target_update_interval: int = 1  # gradient steps between Polyak updates of the target critics


KEYS = SOFT_KEYS.extend(
    keys=("tau", "target_update_interval"),
    refused={**BATCH_NORM_IS_CROSSQS, **QUANTILES_ARE_TQCS},
)


def build_config(params: Mapping[str, Any], n_envs: int, where: str) -> SACConfig:
    """A checked SACConfig (SAC, DroQ) from the learner keys of a merged hyperparameter entry."""
    values, policy_kwargs = read_shared(params, n_envs, where, KEYS)
    return SACConfig(**values, **read_soft(params, policy_kwargs, n_envs, where), **read_target(params))


def config_to_hyperparams(cfg: SACConfig) -> dict[str, Any]:
    """The inverse of build_config, in file spelling: what config.yml stores, sorted."""
    return dict(sorted((soft_hyperparams(cfg) | target_hyperparams(cfg)).items()))


# DroQ (Hiraoka et al. 2022, arXiv:2110.02034): SAC with a dropout + layer-norm critic and a high
# update-to-data ratio. Keys use the hyperparameter-file spelling, so files and -params override them.
DROQ_PRESET: dict[str, Any] = {
    "gradient_steps": 20,
    "policy_delay": 20,
    "learning_starts": 10_000,
    "policy_kwargs": {"dropout_rate": 0.01, "layer_norm": True},
}
