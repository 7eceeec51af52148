"""TQC's Optuna search space: RL Zoo's, its off-policy (SAC's) space plus the number of quantiles and how many of
each critic's top quantiles the target drops."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import optuna

from rlbench.tuning.search_spaces import SearchSpace
from rlbench.tuning.search_spaces.off_policy import off_policy_hyperparams, suggest_off_policy


def suggest_tqc(trial: optuna.Trial) -> None:
    suggest_off_policy(trial)
    n_quantiles = trial.suggest_int("n_quantiles", 5, 50)
    # The range depends on n_quantiles (as RL Zoo's): dropping every quantile would leave no target.
    trial.suggest_int("top_quantiles_to_drop_per_net", 0, n_quantiles - 1)


def tqc_hyperparams(p: Mapping[str, Any]) -> dict[str, Any]:
    out = off_policy_hyperparams(p)
    out["policy_kwargs"] = {**out["policy_kwargs"], "n_quantiles": p["n_quantiles"]}
    return {**out, "top_quantiles_to_drop_per_net": p["top_quantiles_to_drop_per_net"]}


TQC_SPACE = SearchSpace(suggest_tqc, tqc_hyperparams)
