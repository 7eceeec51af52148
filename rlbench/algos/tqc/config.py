"""TQC's typed, frozen hyperparameters (defaults as SB3-contrib's and SBX's TQC)."""

from __future__ import annotations

from dataclasses import dataclass

from rlbench.algos.common.quantiles import Quantiles
from rlbench.algos.soft.config import SoftConfig


@dataclass(frozen=True, kw_only=True)
class TQCConfig(SoftConfig):
    tau: float = 0.005  # Polyak rate of the target critics
    target_update_interval: int = 1  # gradient steps between Polyak updates of the target critics
    quantiles: Quantiles = Quantiles()  # noqa: RUF009 (frozen)
