"""Typed, frozen hyperparameters of SAC (defaults as SBX's SAC) and the DroQ preset.

CrossQ uses the same config type (its preset lives in the registry); it has no target network, so
`tau` is unused there and refused by the config builder.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from rlbench.algos.common.schedules import ConstantSchedule, Schedule
from rlbench.networks.mlp import NetworkConfig


@dataclass(frozen=True)
class EntropyCoef:
    """The temperature alpha: learned from `initial` (ent_coef auto / auto_<x>) or fixed."""

    initial: float = 1.0
    learned: bool = True


@dataclass(frozen=True, kw_only=True)
class SACConfig:
    # Actor and temperature (the temperature uses the initial value). Frozen, so a shared default is safe.
    learning_rate: Schedule = ConstantSchedule(3e-4)  # noqa: RUF009
    qf_learning_rate: float | None = None  # critic; None -> follows learning_rate
    buffer_size: int = 1_000_000
    learning_starts: int = 100  # env steps of uniform random actions before training
    batch_size: int = 256
    tau: float = 0.005  # Polyak rate of the target critics
    gamma: float = 0.99
    train_freq: int = 1  # vector steps between training iterations
    gradient_steps: int = 1  # per training iteration (resolved: never -1 here)
    policy_delay: int = 1  # actor and temperature update every `policy_delay` gradient steps
    ent_coef: EntropyCoef = EntropyCoef()
    target_entropy: float | None = None  # None -> -dim(A)
    n_critics: int = 2
    adam_b1: float = 0.9
    actor: NetworkConfig = field(default_factory=NetworkConfig)
    critic: NetworkConfig = field(default_factory=NetworkConfig)


# DroQ (Hiraoka et al. 2022, arXiv:2110.02034): SAC with a dropout + layer-norm critic and a high
# update-to-data ratio. Keys use the hyperparameter-file spelling, so files and -params override them.
DROQ_PRESET: dict[str, Any] = {
    "gradient_steps": 20,
    "policy_delay": 20,
    "learning_starts": 10_000,
    "policy_kwargs": {"dropout_rate": 0.01, "layer_norm": True},
}
