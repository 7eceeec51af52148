"""TQC's typed, frozen hyperparameters (defaults as SB3-contrib's and SBX's TQC) and its keys."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from rlbench.algos.common.config import BATCH_NORM_IS_CROSSQS, read_shared
from rlbench.algos.common.quantiles import Quantiles, quantile_hyperparams, read_quantiles
from rlbench.algos.common.soft_config import SOFT_KEYS, SoftConfig, read_soft, soft_hyperparams
from rlbench.algos.common.targets import read_target, target_hyperparams


@dataclass(frozen=True, kw_only=True)
class TQCConfig(SoftConfig):
    tau: float = 0.005  # Polyak rate of the target critics
    target_update_interval: int = 1  # gradient steps between Polyak updates of the target critics
    quantiles: Quantiles = Quantiles()  # noqa: RUF009 (frozen)


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
    """The inverse of build_config, in file spelling: what config.yml stores, sorted."""
    return dict(sorted(quantile_hyperparams(soft_hyperparams(cfg) | target_hyperparams(cfg), cfg.quantiles).items()))
