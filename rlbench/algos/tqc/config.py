"""TQC's typed, frozen hyperparameters (defaults as SB3-contrib's and SBX's TQC) and its keys.

The quantile settings are also CrossQ's when it runs with quantile critics (CrossQ + TQC).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from rlbench.algos.common.config import (
    BATCH_NORM_IS_CROSSQS,
    SHARED_KEYS,
    ActorCriticConfig,
    read_shared,
    shared_hyperparams,
)
from rlbench.algos.common.spelling import number
from rlbench.algos.sac.config import read_target, target_hyperparams
from rlbench.errors import ConfigError


@dataclass(frozen=True)
class Quantiles:
    """Distributional critics (Kuznetsov et al. 2020): each of the n_critics critics outputs
    `n_quantiles` quantiles of the return; the TD target pools the next state's quantiles of all
    critics, sorts them and drops the top `top_quantiles_to_drop_per_net` x n_critics (the truncation
    that controls overestimation)."""

    n_quantiles: int = 25
    top_quantiles_to_drop_per_net: int = 2

    def n_target_quantiles(self, n_critics: int) -> int:
        return (self.n_quantiles - self.top_quantiles_to_drop_per_net) * n_critics


@dataclass(frozen=True, kw_only=True)
class TQCConfig(ActorCriticConfig):
    tau: float = 0.005  # Polyak rate of the target critics
    target_update_interval: int = 1  # gradient steps between Polyak updates of the target critics
    quantiles: Quantiles = Quantiles()


KEYS = SHARED_KEYS.extend(
    keys=("tau", "target_update_interval", "top_quantiles_to_drop_per_net"),
    policy_kwargs=("n_quantiles",),
    refused=BATCH_NORM_IS_CROSSQS,
)


def read_quantiles(params: Mapping[str, Any], policy_kwargs: Mapping[str, Any]) -> Quantiles:
    """n_quantiles (a policy_kwargs key, as in RL Zoo's files) and top_quantiles_to_drop_per_net (top level)."""
    default = Quantiles()
    n_quantiles = default.n_quantiles
    if "n_quantiles" in policy_kwargs:
        n_quantiles = number(policy_kwargs, "n_quantiles", int, 1)
    drop = default.top_quantiles_to_drop_per_net
    if "top_quantiles_to_drop_per_net" in params:
        drop = number(params, "top_quantiles_to_drop_per_net", int, 0)
    if drop >= n_quantiles:
        raise ConfigError(
            f"top_quantiles_to_drop_per_net: {drop} would drop every quantile (n_quantiles is {n_quantiles}); "
            f"expected 0 <= top_quantiles_to_drop_per_net < n_quantiles"
        )
    return Quantiles(n_quantiles, drop)


def quantile_hyperparams(hyperparams: dict[str, Any], quantiles: Quantiles) -> dict[str, Any]:
    """`hyperparams` (file spelling) with the quantile settings added where RL Zoo's files put them."""
    policy_kwargs = {**hyperparams["policy_kwargs"], "n_quantiles": quantiles.n_quantiles}
    return {
        **hyperparams,
        "policy_kwargs": policy_kwargs,
        "top_quantiles_to_drop_per_net": quantiles.top_quantiles_to_drop_per_net,
    }


def build_config(params: Mapping[str, Any], n_envs: int, where: str) -> TQCConfig:
    """A checked TQCConfig from the learner keys of a merged hyperparameter entry."""
    values, policy_kwargs = read_shared(params, n_envs, where, KEYS)
    return TQCConfig(**values, **read_target(params), quantiles=read_quantiles(params, policy_kwargs))


def config_to_hyperparams(cfg: TQCConfig) -> dict[str, Any]:
    """The inverse of build_config, in file spelling: what config.yml stores, sorted."""
    return dict(sorted(quantile_hyperparams(shared_hyperparams(cfg) | target_hyperparams(cfg), cfg.quantiles).items()))
