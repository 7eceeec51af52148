"""TD3's typed, frozen hyperparameters (defaults as SBX's TD3; DDPG's are the same with another preset) and
the action noise RL Zoo's `noise_type` and `noise_std` build."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, TypeGuard

from rlbench.algos.common.config import ActorCriticConfig

# RL Zoo's noise_type values.
NoiseType = Literal["normal", "ornstein-uhlenbeck"]
NOISE_TYPES: tuple[NoiseType, ...] = ("normal", "ornstein-uhlenbeck")


def is_noise_type(value: object) -> TypeGuard[NoiseType]:
    """Whether `value` is one of NOISE_TYPES (narrows a value read from a file to NoiseType)."""
    return value in NOISE_TYPES


@dataclass(frozen=True)
class ActionNoise:
    """Exploration noise added to the deterministic action, per action dimension with std `std` (RL Zoo's
    NormalActionNoise / OrnsteinUhlenbeckActionNoise with sigma = noise_std * ones). Ornstein-Uhlenbeck
    keeps one state per env (`n_envs`), with SB3's theta and dt, restarting from 0 at each episode start."""

    kind: NoiseType
    std: float
    n_envs: int = 1
    theta: float = 0.15
    dt: float = 1e-2


@dataclass(frozen=True, kw_only=True)
class TD3Config(ActorCriticConfig):
    policy_delay: int = 2  # actor and target networks update every `policy_delay` gradient steps
    tau: float = 0.005  # Polyak rate of the target actor and critics
    target_policy_noise: float = 0.2  # std of the noise on the target action (target policy smoothing)
    target_noise_clip: float = 0.5  # that noise is clipped to [-target_noise_clip, target_noise_clip]
    action_noise: ActionNoise | None = None  # exploration noise; None: the actor's action as it is
