"""The host side of a training run, and how it goes into a checkpoint and comes back.

Together with the learner state and the replay buffer, `HostState` is everything the loop needs to
continue exactly where it stopped: counters, the current observations and the action already chosen
for them, transitions collected since the last training iteration, PRNG states, episode bookkeeping,
the evaluation history, the observation and return statistics of `normalize` and, per env, how its
current episode started and the actions taken since (`EpisodeRecord`, replayed on resume to rebuild
the env's state).
"""

from __future__ import annotations

import io
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import SupportsIndex

import jax
import numpy as np
import numpy.typing as npt

from rlbench.envs.episode_restore import EpisodeRecord
from rlbench.envs.jax_native.vector import EnvCarry
from rlbench.envs.obs_normalizer import VecNormalizeStats
from rlbench.envs.reported import ReportedEpisodes
from rlbench.files import atomic_write_bytes
from rlbench.store.learner_state import state_to_bytes
from rlbench.store.manifest import HostInfo
from rlbench.store.metric_names import current_names
from rlbench.types import EnvSpec, Transition


@dataclass
class Evaluations:
    """RL Zoo's evaluations.npz: timesteps [n_evals], results and ep_lengths [n_evals, n_episodes]."""

    timesteps: list[int] = field(default_factory=list)
    results: list[np.ndarray] = field(default_factory=list)
    ep_lengths: list[np.ndarray] = field(default_factory=list)

    def append(self, step: int, returns: np.ndarray, lengths: np.ndarray) -> None:
        self.timesteps.append(step)
        self.results.append(returns)
        self.ep_lengths.append(lengths)

    def arrays(self) -> dict[str, np.ndarray]:
        return {
            "timesteps": np.array(self.timesteps, np.int64),
            "results": np.array(self.results, np.float64),
            "ep_lengths": np.array(self.ep_lengths, np.int64),
        }

    def save(self, path: Path) -> None:
        buffer = io.BytesIO()
        np.savez(buffer, **self.arrays())  # type: ignore[arg-type]  # numpy's stub: **kwds might name allow_pickle
        atomic_write_bytes(path, buffer.getvalue())

    @classmethod
    def from_arrays(cls, arrays: dict[str, np.ndarray]) -> Evaluations:
        return cls([int(t) for t in arrays["timesteps"]], list(arrays["results"]), list(arrays["ep_lengths"]))


@dataclass
class EpisodeTracker:
    """Host-side returns and lengths of the episodes running in each env."""

    n_envs: int
    returns: np.ndarray = field(init=False)
    lengths: np.ndarray = field(init=False)
    finished_returns: list[float] = field(default_factory=list)
    finished_lengths: list[int] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.returns = np.zeros(self.n_envs)
        self.lengths = np.zeros(self.n_envs, dtype=np.int64)

    def step(
        self,
        reward: np.ndarray,
        done: np.ndarray,
        valid: np.ndarray | None = None,
        reported: ReportedEpisodes | None = None,
    ) -> list[tuple[int, float, int]]:
        """Account one vector step (`valid`: which envs made a transition; an EnvPool reset step adds no length);
        returns the episodes that ended: (env index, return, length). With `reported` (envs that report their own
        episodes: Atari's games, rlbench.envs.reported) those are the episodes that ended, and the agent's episodes
        are followed only for the running counts."""
        self.returns += reward
        self.lengths += 1 if valid is None else valid
        ended = []
        for i in np.flatnonzero(done):
            ended.append((int(i), float(self.returns[i]), int(self.lengths[i])))
            self.restart(i)
        if reported is not None:
            games = np.flatnonzero(reported.ended)
            ended = [(int(i), float(reported.returns[i]), int(reported.lengths[i])) for i in games]
        for _, episode_return, length in ended:
            self.finished_returns.append(episode_return)
            self.finished_lengths.append(length)
        return ended

    def restart(self, i: SupportsIndex) -> None:
        self.returns[i] = 0.0
        self.lengths[i] = 0

    def summary(self, window: int = 100) -> dict[str, float | int]:
        # time/episodes is a count: an integer, as SB3 logs it ("1" in progress.csv, not "1.0")
        if not self.finished_returns:
            return {"time/episodes": 0}
        return {
            "rollout/ep_rew_mean": float(np.mean(self.finished_returns[-window:])),
            "rollout/ep_len_mean": float(np.mean(self.finished_lengths[-window:])),
            "time/episodes": len(self.finished_returns),
        }


class PendingTransitions:
    """Numpy staging for the transitions of one training iteration, per seed: [n_seeds, train_freq * n_envs, ...]
    (an on-policy learner's whole rollout, n_steps * n_envs, step after step). `truncated` is staged, saved
    and passed on only when `stages_truncation` (the learner's `Collection` says so: GAE stops at every
    episode end; a replay buffer keeps no such column)."""

    FIELDS = ("obs", "action", "reward", "next_obs", "terminated")

    def __init__(self, n_seeds: int, capacity: int, spec: EnvSpec, stages_truncation: bool = False):
        self.capacity, self.stages_truncation = capacity, stages_truncation
        self.truncated = np.zeros((n_seeds, capacity), np.float32)
        self.obs = np.zeros((n_seeds, capacity, spec.obs_dim), spec.obs_dtype)  # images stay uint8
        self.action = np.zeros((n_seeds, capacity, spec.action_dim), np.float32)
        self.reward = np.zeros((n_seeds, capacity), np.float32)
        self.next_obs = np.zeros((n_seeds, capacity, spec.obs_dim), spec.obs_dtype)
        self.terminated = np.zeros((n_seeds, capacity), np.float32)
        self.count = 0  # the same for every seed: they step together

    @property
    def full(self) -> bool:
        return self.count == self.capacity

    @property
    def saved_fields(self) -> tuple[str, ...]:
        return (*self.FIELDS, "truncated") if self.stages_truncation else self.FIELDS

    def add(
        self,
        obs: np.ndarray,
        action: np.ndarray,
        reward: np.ndarray,
        next_obs: np.ndarray,
        terminated: np.ndarray,
        truncated: np.ndarray,
    ) -> None:
        """One vector step of every seed: arrays [n_seeds, n_envs, ...] (`terminated`, `truncated`: bool)."""
        rows = slice(self.count, self.count + reward.shape[1])
        self.obs[:, rows], self.action[:, rows], self.reward[:, rows] = obs, action, reward
        self.next_obs[:, rows], self.terminated[:, rows] = next_obs, terminated
        if self.stages_truncation:
            self.truncated[:, rows] = truncated & ~terminated
        self.count += reward.shape[1]

    def rows(self) -> Transition:
        """Every staging row, [n_seeds, capacity, ...] (those past `count` hold old or zero values), as views."""
        truncated = self.truncated if self.stages_truncation else None
        # Host rows in a Transition, typed for device arrays: the device programs take numpy arrays as they are.
        columns = (self.obs, self.action, self.reward, self.next_obs, self.terminated, truncated)
        return Transition(*columns)  # type: ignore[arg-type]

    def take(self) -> Transition:
        self.count = 0
        # Copies: the arrays are refilled while the device may still be reading the last batch.
        copied: Transition = jax.tree.map(np.copy, self.rows())
        return copied


@dataclass
class SeedHost:
    """What each seed of a run keeps on the host for itself."""

    seed: int
    warmup_rng: np.random.Generator  # uniform actions before learning_starts
    episodes: EpisodeTracker
    evaluations: Evaluations = field(default_factory=Evaluations)
    best_mean_reward: float = -np.inf
    episodes_at_last_log: int = 0
    failed: str | None = None  # why this seed stopped training (it diverged); None while it trains


@dataclass
class HostState:
    """The host side of a run of `len(seeds)` seeds that step together. Arrays have a leading seed axis."""

    env_steps: int  # per seed
    vector_steps: int
    update_start: int  # updates run once env_steps > update_start (learning_starts, or later after a resume)
    obs: np.ndarray  # [n_seeds, n_envs, obs_dim]: current observations
    # What the last update chose for `obs`, and the typed PRNG keys for acting, in the learner's device
    # layout: [n_seeds, n_envs, action_dim] and [n_seeds], without the seed axis when there is one seed.
    next_action: jax.Array | np.ndarray | None
    act_key: jax.Array
    pending: PendingTransitions
    seeds: list[SeedHost]
    # the last update's training metrics, [n_seeds] each (device arrays until logged)
    metrics: Mapping[str, jax.Array | np.ndarray]
    normalizer: VecNormalizeStats | None = None  # RL Zoo's `normalize`: the seeds' running statistics
    # The device loop's training envs (rlbench.loop.device): their state, in the device layout, saved whole
    # (a host loop's envs are replayed from their EpisodeRecords instead); and, from checkpoints, each seed's
    # saved bytes until the loop has checked them against the envs it builds.
    device_envs: EnvCarry | None = None
    saved_device_envs: list[bytes | None] | None = None

    @property
    def active(self) -> npt.NDArray[np.bool_]:
        """[n_seeds] bool: the seeds still training."""
        return np.array([seed.failed is None for seed in self.seeds])

    def to_checkpoint(
        self, index: int, records: list[EpisodeRecord | None] | None
    ) -> tuple[HostInfo, dict[str, np.ndarray]]:
        """Seed `index`'s host state as a single run's checkpoint holds it: (its scalars, for the manifest;
        arrays stored as host/<name>.npy); `records` are that seed's envs' episode records (None when the
        envs could not be asked)."""
        seed, n_seeds = self.seeds[index], len(self.seeds)
        metrics = host_metrics(self.metrics)
        info = HostInfo(
            env_steps=self.env_steps,
            vector_steps=self.vector_steps,
            episodes_at_last_log=seed.episodes_at_last_log,
            update_start=self.update_start,
            pending_count=self.pending.count,
            best_mean_reward=None if np.isneginf(seed.best_mean_reward) else seed.best_mean_reward,
            warmup_rng=seed.warmup_rng.bit_generator.state,  # the manifest's JSON writer takes numpy values
            metrics={name: float(np.asarray(value).reshape(-1)[index]) for name, value in metrics.items()},
            episode_starts=None if records is None else tuple(None if r is None else r.start for r in records),
        )
        arrays = {
            "obs": self.obs[index],
            # Keys and actions are in the device layout: no seed axis when the run has one seed.
            "act_key": np.asarray(jax.random.key_data(self.act_key)).reshape(n_seeds, -1)[index],
            "episode_returns": seed.episodes.returns,
            "episode_lengths": seed.episodes.lengths,
            "finished_returns": np.array(seed.episodes.finished_returns, np.float64),
            "finished_lengths": np.array(seed.episodes.finished_lengths, np.int64),
            **{
                f"pending_{name}": getattr(self.pending, name)[index, : self.pending.count]
                for name in self.pending.saved_fields
            },
            **{f"eval_{name}": value for name, value in seed.evaluations.arrays().items()},
        }
        if self.device_envs is not None:
            envs = self.device_envs if n_seeds == 1 else jax.tree.map(lambda leaf: leaf[index], self.device_envs)
            arrays["device_envs"] = np.frombuffer(state_to_bytes(envs), np.uint8)
        if self.next_action is not None:
            arrays["next_action"] = np.asarray(self.next_action).reshape(n_seeds, *self.obs.shape[1:2], -1)[index]
        for i, record in enumerate(records or []):
            if record is not None:
                arrays[f"episode_actions_{i}"] = record.actions
        return info, arrays

    @classmethod
    def from_checkpoints(
        cls, saved: list[tuple[HostInfo, dict[str, np.ndarray]]], seeds: list[int], spec: EnvSpec, capacity: int
    ) -> tuple[HostState, list[EpisodeRecord | None] | None]:
        """The host state of a run from each seed's (manifest host info, host arrays), and the envs' episode
        records to replay, seed after seed (None: start new episodes). The seeds' counters must agree."""
        first = saved[0][0]
        for info, _ in saved[1:]:
            for counter in ("env_steps", "vector_steps", "update_start", "pending_count"):
                if getattr(info, counter) != getattr(first, counter):
                    raise ValueError(
                        f"the seeds' checkpoints disagree on {counter} ({getattr(info, counter)} != "
                        f"{getattr(first, counter)})"
                    )
        next_actions = [action for _, arrays in saved if (action := arrays.get("next_action")) is not None]
        # Under today's names, also in a checkpoint written before rlbench took SB3's.
        saved_metrics = [current_names(info.metrics or {}) for info, _ in saved]
        names = sorted({name for metrics in saved_metrics for name in metrics})
        host = cls(
            env_steps=first.env_steps,
            vector_steps=first.vector_steps,
            update_start=first.update_start,
            obs=np.stack([arrays["obs"] for _, arrays in saved]),
            next_action=np.stack(next_actions) if len(next_actions) == len(saved) else None,
            # jax wraps host key data as it wraps a device array (its stub says Array only)
            act_key=jax.random.wrap_key_data(np.stack([a["act_key"] for _, a in saved])),  # type: ignore[arg-type]
            pending=_saved_pending(saved, spec, capacity),
            seeds=[_saved_seed(seed, info, arrays) for seed, (info, arrays) in zip(seeds, saved, strict=True)],
            metrics={name: np.array([metrics.get(name, np.nan) for metrics in saved_metrics]) for name in names},
            saved_device_envs=[_bytes_or_none(arrays.get("device_envs")) for _, arrays in saved],
        )
        return host, _saved_records(saved)


def _bytes_or_none(array: np.ndarray | None) -> bytes | None:
    return None if array is None else np.ascontiguousarray(array, np.uint8).tobytes()


def _saved_pending(
    saved: list[tuple[HostInfo, dict[str, np.ndarray]]], spec: EnvSpec, capacity: int
) -> PendingTransitions:
    """The transitions the seeds had collected since their last update."""
    stages_truncation = "pending_truncated" in saved[0][1]  # checked against the learner by the caller
    pending = PendingTransitions(len(saved), capacity, spec, stages_truncation)
    pending.count = saved[0][0].pending_count
    for index, (_, arrays) in enumerate(saved):
        for name in pending.saved_fields:
            getattr(pending, name)[index, : pending.count] = arrays[f"pending_{name}"]
    return pending


def _saved_seed(seed: int, info: HostInfo, arrays: dict[str, np.ndarray]) -> SeedHost:
    rng = np.random.default_rng()
    rng.bit_generator.state = info.warmup_rng
    episodes = EpisodeTracker(len(arrays["obs"]))
    episodes.returns[:] = arrays["episode_returns"]
    episodes.lengths[:] = arrays["episode_lengths"]
    episodes.finished_returns = [float(x) for x in arrays["finished_returns"]]
    episodes.finished_lengths = [int(x) for x in arrays["finished_lengths"]]
    return SeedHost(
        seed=seed,
        warmup_rng=rng,
        episodes=episodes,
        evaluations=Evaluations.from_arrays({k[5:]: v for k, v in arrays.items() if k.startswith("eval_")}),
        best_mean_reward=-np.inf if info.best_mean_reward is None else float(info.best_mean_reward),
        episodes_at_last_log=info.episodes_at_last_log,
    )


def _saved_records(saved: list[tuple[HostInfo, dict[str, np.ndarray]]]) -> list[EpisodeRecord | None] | None:
    """Every env's episode record, seed after seed; None when a seed's envs could not be asked when its
    checkpoint was written (a dead worker): then all restart."""
    records: list[EpisodeRecord | None] = []
    for info, arrays in saved:
        if info.episode_starts is None:
            return None
        records += [
            None if start is None else EpisodeRecord(dict(start), arrays[f"episode_actions_{i}"])
            for i, start in enumerate(info.episode_starts)
        ]
    return records


def host_metrics(metrics: Mapping[str, jax.Array | np.ndarray]) -> dict[str, np.ndarray]:
    """Training metrics on the host, [n_seeds] float64 each: the device -> host transfer, done only when
    they are logged or checkpointed."""
    return {name: np.asarray(value, np.float64).reshape(-1) for name, value in jax.device_get(metrics).items()}
