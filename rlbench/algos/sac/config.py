"""SAC's typed, frozen hyperparameters (defaults as SBX's SAC); DroQ's are the same with another preset."""

from __future__ import annotations

from dataclasses import dataclass

from rlbench.algos.soft.config import TargetCriticConfig


@dataclass(frozen=True, kw_only=True)
class SACConfig(TargetCriticConfig):
    """SAC's fields are the target-critic learner's: the SAC family's, tau and target_update_interval."""
