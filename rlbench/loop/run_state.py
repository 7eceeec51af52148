"""What a run's loop works on, in one record: the run's settings and envs, its compiled entry points and
schedule, the device carry (learner states and replay buffers, with the seed axis), the host state, and
where each seed's outputs go. The loop's stages (rlbench.loop.collect, .divergence, .evaluation,
.metrics_log, .save_points) are functions of this record; rlbench.loop.training_loop runs them in order."""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import numpy.typing as npt
from gymnasium.vector import VectorEnv

from rlbench.algos.common.seed_axis import SeedAxis
from rlbench.buffers.normalization import Normalization
from rlbench.config.entry import RunConfig
from rlbench.envs.episode_restore import EpisodeRecord, episode_records
from rlbench.envs.reported import reports_episodes
from rlbench.loggers.base import Logger
from rlbench.loggers.monitor import MonitorFiles
from rlbench.loop.compiled import Carry, DeviceCarry, EntryPoints
from rlbench.loop.divergence_guard import DivergenceGuard
from rlbench.loop.saving import CheckpointSettings, RunCheckpoints
from rlbench.loop.schedule import TrainSchedule
from rlbench.store.host_state import Evaluations, HostState
from rlbench.types import EnvSpec, PyTree


@dataclass(frozen=True)
class SeedOutput:
    """Where one seed's outputs go: its logger (progress.csv, TensorBoard, W&B), its run folder
    (evaluations.npz, Monitor files, failed.txt) and its checkpoints."""

    make_logger: Callable[[Sequence[str]], Logger]
    run_dir: Path | None = None
    checkpoints: CheckpointSettings | None = None


@dataclass
class TrainResult:
    state: PyTree  # learner state, with a leading seed axis when the run has several seeds
    buffer_state: PyTree
    host: HostState
    wall_time: float
    interrupted: str | None = None  # the signal's name when a stop was requested
    checkpoints: list[Path | None] = field(default_factory=list)  # per seed: the last checkpoint written
    failed: dict[int, str] = field(default_factory=dict)  # seed index -> why it stopped (it diverged)

    @property
    def env_steps(self) -> int:
        return self.host.env_steps

    @property
    def checkpoint(self) -> Path | None:
        return self.checkpoints[0] if self.checkpoints else None

    @property
    def episode_returns(self) -> list[float]:
        return self.host.seeds[0].episodes.finished_returns

    @property
    def evaluations(self) -> Evaluations:
        return self.host.seeds[0].evaluations


@dataclass
class LoopRun:
    """A run of `len(outputs)` seeds that step together, as the loop's stages see it."""

    run: RunConfig
    spec: EnvSpec
    env: VectorEnv | None  # None: the envs are on the device (rlbench.loop.device)
    eval_env: VectorEnv | None
    programs: EntryPoints
    schedule: TrainSchedule
    outputs: list[SeedOutput]
    loggers: list[Logger]
    carry: Carry | DeviceCarry  # the host loop's, or the device loop's (which holds the envs too)
    host: HostState
    saves: RunCheckpoints
    guard: DivergenceGuard
    monitors: list[MonitorFiles | None]
    # which seeds train, [n_seeds] bool for the device (None for one seed: it trains until it fails)
    training: npt.NDArray[np.bool_] | None = None
    failed: dict[int, str] = field(default_factory=dict)  # seed index -> why it stopped

    def __post_init__(self) -> None:
        self.training_changed()

    @property
    def axis(self) -> SeedAxis:
        return self.programs.axis

    @property
    def state(self) -> PyTree:
        """The learner states (with the seed axis)."""
        return self.carry.state

    @state.setter
    def state(self, state: PyTree) -> None:
        self.carry = self.carry._replace(state=state)

    def training_changed(self) -> None:
        """host.active changed (a seed was frozen): the device flags follow."""
        self.training = self.axis.device(self.host.active) if self.axis.batched else None

    def episode_records(self) -> list[EpisodeRecord | None] | None:
        """Each training env's record of its episode, for a checkpoint (None: the envs cannot be asked, or
        they live on the device, where the checkpoint holds their state instead)."""
        return None if self.env is None else episode_records(self.env)

    def normalization(self) -> Normalization | None:
        """The statistics of `normalize` as they stand, for the device (None without `normalize`)."""
        normalizer = self.host.normalizer
        return None if normalizer is None else self.axis.device(normalizer.device())

    def progress_remaining(self) -> np.float32:
        """SB3's progress_remaining, 1 at the start of the run and 0 at its end (learning-rate and exploration
        schedules), after the env steps taken so far."""
        return np.float32(1.0 - self.host.env_steps / self.run.n_timesteps)

    def policy_inputs(self) -> tuple[np.ndarray, Normalization | None]:
        """(the current observations for the device, the statistics it scales them with). An on-policy learner
        with `normalize` gets them scaled here, on the host (and no statistics): the rollout stages the very
        array the policy acted on (rlbench.loop.collect.stage), as SB3's PPO stores VecNormalize's output."""
        normalizer = self.host.normalizer
        if normalizer is not None and self.programs.learner.collection.stages_rollout:
            return self.axis.device(normalizer.scaled_obs(self.host.obs)), None
        return self.axis.device(self.host.obs), self.normalization()

    @functools.cached_property
    def reports_episodes(self) -> bool:
        """Whether the envs report their own episodes (Atari's games: rlbench.envs.reported); asked every env step,
        known once the run's wrappers are."""
        return reports_episodes(self.run.env_wrappers)

    def by_seed(self, flat: np.ndarray) -> np.ndarray:
        """[n_seeds * n, ...] -> [n_seeds, n, ...]: the vector env's rows, seed after seed."""
        return flat.reshape(self.axis.n_seeds, -1, *flat.shape[1:])
