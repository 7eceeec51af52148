"""TQC's learner: SAC's gradient step (rlbench/algos/sac/update.py) with quantile critics and TQC's
truncated distributional objective (losses.py). Same state as SAC (target critic, temperature)."""

from __future__ import annotations

from rlbench.algos.common.learner import Learner
from rlbench.algos.sac import update as sac
from rlbench.algos.sac.state import SACState
from rlbench.algos.tqc.config import TQCConfig
from rlbench.algos.tqc.losses import quantile_objective
from rlbench.types import EnvSpec


def make_learner(cfg: TQCConfig, spec: EnvSpec) -> Learner[SACState]:
    return sac.make_learner(cfg, spec, quantile_objective(cfg.quantiles), cfg.quantiles.n_quantiles)
