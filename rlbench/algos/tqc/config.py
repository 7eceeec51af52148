"""TQC's typed, frozen hyperparameters (defaults as SB3-contrib's and SBX's TQC)."""

from __future__ import annotations

from dataclasses import dataclass

from rlbench.algos.common.quantiles import Quantiles
from rlbench.algos.soft.config import TargetCriticConfig


@dataclass(frozen=True, kw_only=True)
class TQCConfig(TargetCriticConfig):
    quantiles: Quantiles = Quantiles()  # noqa: RUF009 (frozen)
