"""DQN's and QR-DQN's typed, frozen hyperparameters (defaults: SBX's DQN, SB3-contrib's QR-DQN) and the
epsilon schedule of their exploration."""

from __future__ import annotations

from dataclasses import dataclass, field

import jax
import jax.numpy as jnp

from rlbench.algos.common.config import ReplayConfig
from rlbench.algos.common.schedules import ConstantSchedule, Schedule
from rlbench.networks.mlp import NetworkConfig
from rlbench.networks.nature_cnn import Features


@dataclass(frozen=True)
class EpsilonSchedule:
    """SB3's linear exploration schedule: epsilon falls from `initial` to `final` over the first `fraction` of
    the run, then stays at `final`. As SB3's LinearSchedule, of progress_remaining (1 at the start, 0 at the end)."""

    fraction: float = 0.1
    initial: float = 1.0
    final: float = 0.05

    def __call__(self, progress_remaining: jax.Array) -> jax.Array:
        elapsed = 1.0 - progress_remaining
        if self.fraction == 0:  # static: final from the first step (SB3 would divide by zero)
            return jnp.full_like(elapsed, self.final)
        falling = self.initial + elapsed * (self.final - self.initial) / self.fraction
        return jnp.where(elapsed > self.fraction, self.final, falling)


@dataclass(frozen=True, kw_only=True)
class DQNConfig(ReplayConfig):
    """DQN, and QR-DQN when `n_quantiles` is set. The target network moves towards the Q-network (Polyak rate
    `tau`, 1: a copy) every `target_update_interval` env steps, counted as SB3 counts them: in vector steps,
    every max(target_update_interval // n_envs, 1) of them, from the first step of the run."""

    learning_rate: Schedule = ConstantSchedule(1e-4)  # noqa: RUF009 (frozen: a shared default is safe)
    batch_size: int = 32
    train_freq: int = 4
    tau: float = 1.0
    target_update_interval: int = 1000  # SBX's (SB3's is 10000)
    exploration_schedule: EpsilonSchedule = field(default_factory=EpsilonSchedule)
    max_grad_norm: float | None = None  # clip the gradient's global norm (SB3's default 10); None: SBX's, no clipping
    q_network: NetworkConfig = field(default_factory=NetworkConfig)  # [256, 256] ReLU, as SBX's
    # CnnPolicy: NatureCNN before the q_network's layers (SB3's: none after it)
    features: Features = field(default_factory=Features)
    vector_envs: int = 1  # n_envs: the target interval and the warm-up count vector steps
    n_quantiles: int | None = None  # QR-DQN: quantiles of each action's return

    @property
    def target_interval_vector_steps(self) -> int:
        return max(self.target_update_interval // self.vector_envs, 1)


def qrdqn_config(**values: object) -> DQNConfig:
    """QR-DQN with SB3-contrib's defaults below the given values."""
    defaults: dict[str, object] = {
        "learning_rate": ConstantSchedule(5e-5),
        "target_update_interval": 10000,
        "exploration_schedule": EpsilonSchedule(fraction=0.005, final=0.01),
        "q_network": NetworkConfig(hidden=(64, 64)),
        "n_quantiles": 200,
    }
    return DQNConfig(**{**defaults, **values})  # type: ignore[arg-type]
