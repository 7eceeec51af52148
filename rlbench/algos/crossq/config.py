"""CrossQ's typed, frozen hyperparameters (Bhatt et al. 2024; defaults as SBX's CrossQ).

CrossQ has no target network (no `tau`); BatchRenorm's settings are in the networks' NetworkConfig. With
quantiles set its critics are TQC's quantile critics (CrossQ + TQC).
"""

from __future__ import annotations

from dataclasses import dataclass

from rlbench.algos.common.quantiles import Quantiles
from rlbench.algos.soft.config import SoftConfig


@dataclass(frozen=True, kw_only=True)
class CrossQConfig(SoftConfig):
    quantiles: Quantiles | None = None  # quantile critics (CrossQ + TQC) when n_quantiles is set
