"""The algorithms rlbench offers, by command-line name. DroQ is SAC plus a preset: no code of its own.
CrossQ has its own critic and actor steps and shares everything else with SAC."""

from __future__ import annotations

import difflib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from rlbench.algos.common.learner import Learner
from rlbench.algos.crossq.update import make_learner as make_crossq_learner
from rlbench.algos.sac.config import DROQ_PRESET
from rlbench.algos.sac.update import make_learner as make_sac_learner
from rlbench.buffers.uniform import UniformBuffer
from rlbench.config import build_crossq_config, build_sac_config, sac_config_to_hyperparams
from rlbench.errors import ConfigError
from rlbench.types import EnvSpec


@dataclass(frozen=True)
class AlgoSpec:
    name: str
    preset: Mapping[str, Any]  # hyperparameters (file spelling) applied below the file entry
    build_config: Callable[[Mapping[str, Any], int, str], Any]  # (learner keys, n_envs, where) -> config
    config_to_hyperparams: Callable[[Any], dict[str, Any]]
    make_learner: Callable[[Any, EnvSpec, UniformBuffer], Learner[Any]]


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

ALGORITHMS: dict[str, AlgoSpec] = {
    "sac": AlgoSpec("sac", {}, build_sac_config, sac_config_to_hyperparams, make_sac_learner),
    "droq": AlgoSpec("droq", DROQ_PRESET, build_sac_config, sac_config_to_hyperparams, make_sac_learner),
    "crossq": AlgoSpec(
        "crossq",
        CROSSQ_PRESET,
        build_crossq_config,
        lambda cfg: sac_config_to_hyperparams(cfg, crossq=True),
        make_crossq_learner,
    ),
}


def get_algo(name: str) -> AlgoSpec:
    if name in ALGORITHMS:
        return ALGORITHMS[name]
    close = difflib.get_close_matches(name, list(ALGORITHMS), n=1)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    raise ConfigError(f"unknown algorithm {name!r}{hint} (valid: {', '.join(ALGORITHMS)})")
