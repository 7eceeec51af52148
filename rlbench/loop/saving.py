"""A run's state into checkpoints and back: what the host loop saves, per seed, and how it resumes.

Each seed of a run writes its own checkpoints in its own run folder, exactly as a single run with that
seed would write them: its slice of the learner state and of the replay buffer, its host state
(`HostState.to_checkpoint`) and, with `normalize`, its observation and return statistics. A run of
several seeds adds `group` to each manifest (the group id, the seed's index and its siblings' run
folders), so that `-i` on any of them can find the others. No checkpoint ever holds a NaN or inf
learner state.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import jax
import numpy as np
from gymnasium.vector import VectorEnv

from rlbench.algos.common.divergence import non_finite_paths
from rlbench.algos.common.seed_axis import SeedAxis
from rlbench.buffers.normalization import NormalizeConfig
from rlbench.buffers.uniform import BufferState, UniformBuffer, buffer_from_arrays, buffer_to_arrays
from rlbench.envs.episode_restore import EpisodeRecord, restore_episodes
from rlbench.envs.obs_normalizer import STATS_FILE, VecNormalizeStats
from rlbench.errors import ConfigError, DivergenceError, EnvWorkerError, RunFailure
from rlbench.loop.divergence_guard import Verified
from rlbench.store.checkpoint import Checkpoint, prune_periodic_checkpoints, write_checkpoint
from rlbench.store.host_state import EpisodeTracker, HostState, PendingTransitions, SeedHost
from rlbench.store.learner_state import state_from_bytes, state_to_bytes
from rlbench.store.manifest import CheckpointKind, Counters, Divergence, Manifest, RunDescription
from rlbench.types import EnvSpec, PyTree


@dataclass(frozen=True)
class CheckpointSettings:
    """Where and when one seed writes checkpoints (all of them resumable with `train.py -i`).

    - `rl_model_<steps>_steps.zip` every `save_freq` env steps (the newest `keep` kept; 0 keeps all),
      with the replay buffer when `save_replay_buffer`;
    - `best_model.zip` at each new best evaluation (no buffer);
    - `<model_name>.zip` at the end (buffer when `save_replay_buffer`);
    - `rl_model_<steps>_steps.zip` when stopped by a signal or a failure (an env, an evaluation, a
      divergence), always with the buffer: that checkpoint exists to be resumed. After a divergence it
      holds the last learner state found finite, and its manifest says from which env step.
    """

    run_dir: Path
    model_name: str
    description: RunDescription  # the seed's run, in each of its manifests: algo, env, seed, hyperparameters, ...
    save_freq: int = -1
    keep: int = 0
    save_replay_buffer: bool = False


@dataclass
class Restored:
    """What a resume puts back: per-seed learner states and buffers (stacked by the caller) and the host
    state. When `replay_envs`, the envs are to be put back where they were from `records` (None: the
    envs could not be asked, so new episodes); otherwise (n_envs changed) they keep a fresh reset."""

    states: list[PyTree]
    buffer_states: list[BufferState] | None  # None: the checkpoints hold no replay buffer
    host: HostState
    replay_envs: bool
    records: list[EpisodeRecord | None] | None


def restore(
    resume: Sequence[Checkpoint],
    seeds: Sequence[int],
    template: PyTree,
    buffer: UniformBuffer | None,
    spec: EnvSpec,
    n_envs: int,
    capacity: int,
    fresh_obs: np.ndarray,
    normalize: NormalizeConfig | None,
) -> Restored:
    """The run's state from one checkpoint per seed (ConfigError when a checkpoint does not fit).

    `template` is a learner state of the right structure; `fresh_obs` [n_seeds, n_envs, obs_dim] are the
    observations after a new reset, used when n_envs changed (episodes in progress then restart, and
    transitions collected since the last update are dropped). With `normalize`, the checkpoints' statistics
    are restored too."""
    states, buffers = [], []  # buffers: None for a checkpoint without one
    for checkpoint in resume:
        try:
            states.append(state_from_bytes(template, checkpoint.state_bytes))
            arrays = checkpoint.group("replay_buffer")
            if arrays and buffer is None:
                raise ValueError("it holds a replay buffer, and this algorithm keeps none (an on-policy learner)")
            buffers.append(buffer_from_arrays(buffer, arrays) if arrays and buffer is not None else None)
        except ValueError as error:
            raise ConfigError(f"cannot resume from {checkpoint.path}: {error}") from None
    saved = [(checkpoint.manifest.host, checkpoint.group("host")) for checkpoint in resume]
    saved_n_envs = len(saved[0][1]["obs"])
    if saved_n_envs != n_envs or saved[0][0].pending_count > capacity:
        print(
            f"Resuming with n_envs={n_envs} (saved: {saved_n_envs}): episodes in progress "
            "restart, and transitions collected since the last update are dropped"
        )
        saved = [
            (
                dataclasses.replace(info, pending_count=0, episode_starts=None),
                {
                    **{name: value for name, value in arrays.items() if name != "next_action"},
                    "obs": fresh_obs[index],
                    "episode_returns": np.zeros(n_envs),
                    "episode_lengths": np.zeros(n_envs, np.int64),
                },
            )
            for index, (info, arrays) in enumerate(saved)
        ]
        host, _ = HostState.from_checkpoints(saved, list(seeds), spec, capacity)
        host.normalizer = restore_normalizer(resume, normalize, spec, None)
        if host.normalizer is not None:  # the running returns restart with the episodes
            host.normalizer.returns = np.zeros((len(seeds), n_envs))
        return Restored(states, complete(buffers), host, replay_envs=False, records=None)
    try:
        host, records = HostState.from_checkpoints(saved, list(seeds), spec, capacity)
    except ValueError as error:
        raise ConfigError(f"cannot resume the seeds of {resume[0].path} together: {error}") from None
    host.normalizer = restore_normalizer(resume, normalize, spec, n_envs)
    return Restored(states, complete(buffers), host, replay_envs=True, records=records)


def train_after_new_transitions(host: HostState, learning_starts: int, checkpoint: Path) -> None:
    """A resume from a checkpoint without a replay buffer: training waits for learning_starts new transitions."""
    host.update_start = max(host.update_start, host.env_steps + learning_starts)
    print(
        f"{checkpoint} holds no replay buffer: training resumes once {learning_starts} new transitions are "
        f"collected (at {host.update_start} env steps); save one with --save-replay-buffer for an exact continuation"
    )


def restore_normalizer(
    resume: Sequence[Checkpoint], normalize: NormalizeConfig | None, spec: EnvSpec, n_envs: int | None
) -> VecNormalizeStats | None:
    """The seeds' `normalize` statistics from their checkpoints (`n_envs` None: without the running returns)."""
    if normalize is None:
        return None
    try:
        return VecNormalizeStats.from_arrays(
            normalize, [checkpoint.group("normalize") for checkpoint in resume], spec.obs_dim, n_envs
        )
    except ValueError as error:
        raise ConfigError(f"cannot resume from {resume[0].path}: {error}") from None


def restore_envs(
    env: VectorEnv, host: HostState, records: list[EpisodeRecord | None] | None, fresh_seeds: list[int]
) -> None:
    """Put each training env back where it was (`records`, seed after seed; None: new episodes from
    `fresh_seeds`, not the first episodes again); envs that cannot be rebuilt start new episodes."""
    n_envs = host.obs.shape[1]
    if records is None:
        obs, _ = env.reset(seed=fresh_seeds)  # type: ignore[arg-type]  # one seed per env (VectorEnv types one)
        restored = np.zeros(env.num_envs, bool)
    else:
        obs, restored = restore_episodes(env, records, host.obs.reshape(env.num_envs, -1))
    if not restored.all():
        print(
            f"Envs {np.flatnonzero(~restored).tolist()} could not be restored exactly (no record, or "
            "a replay that differs: a non-deterministic env); they start new episodes"
        )
        for i in np.flatnonzero(~restored):
            host.seeds[i // n_envs].episodes.restart(i % n_envs)
            if host.normalizer is not None:
                host.normalizer.restart_episode(i // n_envs, i % n_envs)
        host.next_action = None  # chosen for observations some envs no longer show
    host.obs = obs.reshape(host.obs.shape[0], n_envs, *obs.shape[1:])


def complete(buffers: list[BufferState | None]) -> list[BufferState] | None:
    """Every seed's replay buffer, or None when a checkpoint holds none."""
    present = [buffer for buffer in buffers if buffer is not None]
    return present if len(present) == len(buffers) else None


def new_host_state(
    seeds: Sequence[int],
    obs: np.ndarray,
    act_key: jax.Array,
    spec: EnvSpec,
    learning_starts: int,
    capacity: int,
    normalize: NormalizeConfig | None = None,
) -> HostState:
    """The host state of a run that starts: obs [n_seeds, n_envs, obs_dim] (the first reset's), act_key [n_seeds]."""
    n_envs = obs.shape[1]
    normalizer = None
    if normalize is not None:
        normalizer = VecNormalizeStats.new(normalize, len(seeds), n_envs, spec.obs_dim)
        normalizer.observe_reset(obs)
    return HostState(
        env_steps=0,
        vector_steps=0,
        update_start=learning_starts,
        obs=obs,
        next_action=None,
        act_key=act_key,
        pending=PendingTransitions(len(seeds), capacity, spec),
        seeds=[SeedHost(seed, np.random.default_rng(seed), EpisodeTracker(n_envs)) for seed in seeds],
        metrics={},
        normalizer=normalizer,
    )


class RunCheckpoints:
    """Writes a run's checkpoints: one per training seed, each in its own folder with its own settings.

    The loop passes what a checkpoint holds (learner states and replay buffers with the seed axis, the host
    state, the envs' episode records seed after seed); this class slices out each seed's part."""

    def __init__(self, settings: Sequence[CheckpointSettings] | None, axis: SeedAxis, n_envs: int):
        self.settings, self.axis, self.n_envs = settings, axis, n_envs

    @property
    def enabled(self) -> bool:
        return self.settings is not None

    @property
    def per_seed(self) -> Sequence[CheckpointSettings]:
        """Each seed's settings, in a run that writes checkpoints (its callers check `enabled` first)."""
        assert self.settings is not None, "this run writes no checkpoints"
        return self.settings

    def periodic_due(self, vector_steps: int) -> bool:
        save_freq = self.settings[0].save_freq if self.settings else -1
        return save_freq > 0 and vector_steps % max(save_freq // self.n_envs, 1) == 0

    def prune(self) -> None:
        for settings in self.per_seed:
            prune_periodic_checkpoints(settings.run_dir, settings.keep)

    def write(
        self,
        kind: CheckpointKind,
        path_of: Callable[[CheckpointSettings], Path],
        host: HostState,
        state: PyTree,
        buffer_state: PyTree,
        records: list[EpisodeRecord | None] | None,
        with_buffer: bool | None = None,
        compress: bool = True,
    ) -> list[Path | None]:
        """Each training seed's checkpoint at `path_of(its settings)` (`with_buffer` None: its
        save_replay_buffer); returns the paths, None for a seed that failed."""
        paths: list[Path | None] = []
        for index, settings in enumerate(self.per_seed):
            if host.seeds[index].failed is not None:
                paths.append(None)
                continue
            path = path_of(settings)
            buffer = settings.save_replay_buffer if with_buffer is None else with_buffer
            self.write_seed(
                path,
                kind,
                host,
                index,
                self.axis.take(state, index),
                buffer_state if buffer else None,
                records,
                compress,
            )
            paths.append(path)
        return paths

    def write_seed(
        self,
        path: Path,
        kind: CheckpointKind,
        host: HostState,
        index: int,
        state: PyTree,
        buffer_state: PyTree,
        records: list[EpisodeRecord | None] | None,
        compress: bool = True,
        divergence: Divergence | None = None,
    ) -> None:
        """Seed `index`'s checkpoint of its `state` (no seed axis, checked finite by the caller; DivergenceError
        and nothing written when it is not); its slices of
        `buffer_state` (with the seed axis; None leaves the replay buffer out) and of `records` (every env's
        episode record, None when the envs cannot be asked)."""
        rows = slice(index * self.n_envs, (index + 1) * self.n_envs)
        records = None if records is None else records[rows]
        if not isinstance(buffer_state, BufferState):  # an on-policy learner's storage: empty, nothing to save
            buffer_state = None
        buffer_state = None if buffer_state is None else self.axis.take(buffer_state, index)
        settings = self.per_seed[index]
        info, host_arrays = host.to_checkpoint(index, records)
        arrays = {f"host/{name}": value for name, value in host_arrays.items()}
        if host.normalizer is not None:
            arrays |= {f"normalize/{name}": value for name, value in host.normalizer.to_arrays(index).items()}
        if buffer_state is not None:
            arrays |= {f"replay_buffer/{name}": value for name, value in buffer_to_arrays(buffer_state).items()}
        non_finite = [
            name
            for name, value in arrays.items()
            if np.issubdtype(value.dtype, np.inexact) and not np.isfinite(value).all()
        ]
        if non_finite:  # stored from the envs' own outputs: no learner state can be swapped in for them
            raise EnvWorkerError(
                f"the environments returned NaN or inf ({', '.join(non_finite)}); {path.name} is not written with them"
            )
        non_finite = non_finite_paths(state)
        if non_finite:  # the caller's check missed it (a failure between checks): never saved under a new name
            raise DivergenceError(
                f"the learner state holds NaN or inf ({', '.join(non_finite[:3])}); {path.name} is not written with it"
            )
        manifest = Manifest(
            run=settings.description,
            kind=kind,
            counters=Counters(
                env_steps=host.env_steps,
                gradient_steps=int(state.step),
                episodes=len(host.seeds[index].episodes.finished_returns),
            ),
            host=info,
            replay_buffer=buffer_state is not None,
            divergence=divergence,
        )
        try:
            write_checkpoint(path, manifest, state_to_bytes(state), arrays, compress=compress)
        except OSError as error:  # disk full, quota, permissions: the previous checkpoints are intact
            reason = os.strerror(error.errno) if error.errno else str(error)  # its message names the path already
            raise OSError(error.errno, f"could not write checkpoint {path}: {reason}") from error

    def write_normalization(self, host: HostState) -> None:
        """Each training seed's `normalize` statistics beside its final model: <run>/<env>/vecnormalize.npz."""
        if host.normalizer is None:
            return
        for index, settings in enumerate(self.per_seed):
            if host.seeds[index].failed is None:
                path = settings.run_dir / settings.model_name / STATS_FILE
                path.parent.mkdir(exist_ok=True)  # train.py made it for config.yml; a library caller may not have
                host.normalizer.save(path, index)

    def write_all_after_failure(
        self,
        host: HostState,
        error: RunFailure,
        state: PyTree,
        buffer_state: PyTree,
        records: list[EpisodeRecord | None] | None,
        verified: Verified,
    ) -> list[str]:
        """`write_after_failure` for each training seed; the notes."""
        return [
            self.write_after_failure(host, index, error, self.axis.take(state, index), buffer_state, records, verified)
            for index, seed in enumerate(host.seeds)
            if seed.failed is None
        ]

    def write_after_failure(
        self,
        host: HostState,
        index: int,
        error: RunFailure,
        state: PyTree,
        buffer_state: PyTree,
        records: list[EpisodeRecord | None] | None,
        verified: Verified,
    ) -> str:
        """The checkpoint a failure leaves seed `index` to resume from (always with its buffer, uncompressed
        to be quick); returns the note saying where, or why not. After a divergence it holds the seed's
        last verified state and metrics, and no next action (that came from the diverged actor)."""
        divergence = None
        metrics, next_action = host.metrics, host.next_action
        if isinstance(error, DivergenceError):
            state = self.axis.take(verified.state, index)
            host.metrics, host.next_action = verified.metrics, None
            divergence = Divergence(
                detected_at_env_steps=host.env_steps, learner_state_from_env_steps=verified.env_steps
            )
        path = self.per_seed[index].run_dir / f"rl_model_{host.env_steps}_steps.zip"
        try:
            self.write_seed(
                path, "failure", host, index, state, buffer_state, records, compress=False, divergence=divergence
            )
        except (OSError, RunFailure) as save_error:
            return f"no checkpoint written: {save_error}"
        finally:  # the other seeds of the run train on with their own metrics and actions
            host.metrics, host.next_action = metrics, next_action
        if isinstance(error, DivergenceError):
            return f"checkpoint with the learner state from env step {verified.env_steps}: {path}"
        return f"checkpoint written before the failure: {path}"
