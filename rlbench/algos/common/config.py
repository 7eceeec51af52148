"""The config fields every learner shares (LearnerConfig), every off-policy one (ReplayConfig: also DQN) and every
actor-critic one (ActorCriticConfig: SAC, DroQ, CrossQ, TQC, TD3, DDPG); the SAC
family's own (entropy, gSDE) are in algos/soft/config.py. Each algorithm's config.py adds its fields to this base.
The keys that set them, in RL Zoo's file format, are the boundary's: rlbench/config/algorithms/.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from rlbench.algos.common.schedules import ConstantSchedule, Schedule
from rlbench.networks.mlp import NetworkConfig

# What train_freq counts: vector steps, or episodes (of one env).
TrainFreqUnit = Literal["step", "episode"]


@dataclass(frozen=True, kw_only=True)
class LearnerConfig:
    """What every learner's config holds, off-policy (ActorCriticConfig) or on-policy (algos/ppo's PPOConfig)."""

    # Off-policy: the actor's and the temperature's (the temperature uses the initial value). Frozen, so a
    # shared default is safe.
    learning_rate: Schedule = ConstantSchedule(3e-4)  # noqa: RUF009
    gamma: float = 0.99
    batch_size: int | None = 256  # samples per gradient step; on-policy, None: the whole rollout at once (A2C)


@dataclass(frozen=True, kw_only=True)
class ReplayConfig(LearnerConfig):
    """The fields of every off-policy learner (replay, warm-up, training schedule): the actor-critic family's
    (ActorCriticConfig) and the value-based family's (algos/dqn's DQNConfig)."""

    buffer_size: int = 1_000_000
    learning_starts: int = 100  # env steps of uniform random actions before training
    batch_size: int = 256
    train_freq: int = 1  # vector steps (or episodes, see train_freq_unit) between training iterations
    train_freq_unit: TrainFreqUnit = "step"  # "episode": train at the end of every train_freq-th episode (one env)
    # Per training iteration. -1 only with train_freq_unit "episode": as many as the iteration's env steps
    # (with train_freq in steps, -1 is resolved to train_freq * n_envs when read).
    gradient_steps: int = 1


@dataclass(frozen=True, kw_only=True)
class ActorCriticConfig(ReplayConfig):
    """The fields of every actor-critic learner here (actor, critics, delay); the defaults are SBX's SAC."""

    qf_learning_rate: float | None = None  # critic; None -> follows learning_rate
    policy_delay: int = 1  # actor (and temperature, targets: per algorithm) update every `policy_delay` gradient steps
    n_critics: int = 2
    adam_b1: float = 0.9
    weight_decay: float | None = None  # AdamW's (SimbaPolicy's optimizer, default 1e-4 as SBX's); None: Adam
    actor: NetworkConfig = field(default_factory=NetworkConfig)
    critic: NetworkConfig = field(default_factory=NetworkConfig)

    @property
    def critic_learning_rate(self) -> Schedule | float:
        """qf_learning_rate when set, else the (scheduled) learning_rate."""
        return self.learning_rate if self.qf_learning_rate is None else self.qf_learning_rate
