"""TQC's learner: the SAC family's learner with target critics (rlbench/algos/soft/learner.py), with
quantile critics and TQC's truncated distributional objective (rlbench/algos/common/quantiles.py)."""

from __future__ import annotations

from rlbench.algos.common.learner import Learner
from rlbench.algos.common.quantiles import quantile_objective
from rlbench.algos.soft.learner import SACState, make_soft_learner
from rlbench.algos.tqc.config import TQCConfig
from rlbench.types import EnvSpec


def make_learner(cfg: TQCConfig, spec: EnvSpec) -> Learner[SACState]:
    return make_soft_learner(cfg, spec, quantile_objective(cfg.quantiles), cfg.quantiles.n_quantiles)
