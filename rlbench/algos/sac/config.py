"""SAC's typed, frozen hyperparameters (defaults as SBX's SAC); DroQ's are the same with another preset."""

from __future__ import annotations

from dataclasses import dataclass

from rlbench.algos.soft.config import SoftConfig


@dataclass(frozen=True, kw_only=True)
class SACConfig(SoftConfig):
    tau: float = 0.005  # Polyak rate of the target critics
    target_update_interval: int = 1  # gradient steps between Polyak updates of the target critics
