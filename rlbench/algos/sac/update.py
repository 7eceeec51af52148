"""SAC's learner (Haarnoja et al. 2018): the SAC family's learner with target critics and the soft Q
objective (rlbench/algos/soft/learner.py). DroQ is this learner with its preset."""

from __future__ import annotations

from rlbench.algos.common.learner import Learner
from rlbench.algos.sac.config import SACConfig
from rlbench.algos.soft.learner import SACState, make_soft_learner
from rlbench.types import EnvSpec


def make_learner(cfg: SACConfig, spec: EnvSpec) -> Learner[SACState]:
    return make_soft_learner(cfg, spec)
