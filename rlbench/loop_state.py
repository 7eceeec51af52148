"""The host side of a training run, and how it goes into a checkpoint and comes back.

Together with the learner state and the replay buffer, `HostState` is everything the loop needs to
continue exactly where it stopped: counters, the current observations and the action already chosen
for them, transitions collected since the last training iteration, PRNG states, episode bookkeeping,
the evaluation history and, per env, how its current episode started and the actions taken since
(`EpisodeRecord`, replayed on resume to rebuild the env's state).
"""

from __future__ import annotations

import io
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jax
import numpy as np

from rlbench.files import atomic_write_bytes
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
        np.savez(buffer, **self.arrays())
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

    def step(self, reward: np.ndarray, done: np.ndarray) -> list[tuple[int, float, int]]:
        """Account one vector step; returns the episodes that ended: (env index, return, length)."""
        self.returns += reward
        self.lengths += 1
        ended = []
        for i in np.flatnonzero(done):
            ended.append((int(i), float(self.returns[i]), int(self.lengths[i])))
            self.finished_returns.append(ended[-1][1])
            self.finished_lengths.append(ended[-1][2])
            self.restart(i)
        return ended

    def restart(self, i: int) -> None:
        self.returns[i] = 0.0
        self.lengths[i] = 0

    def summary(self, window: int = 100) -> dict[str, float]:
        if not self.finished_returns:
            return {"time/episodes": 0.0}
        return {
            "rollout/ep_rew_mean": float(np.mean(self.finished_returns[-window:])),
            "rollout/ep_len_mean": float(np.mean(self.finished_lengths[-window:])),
            "time/episodes": float(len(self.finished_returns)),
        }


class PendingTransitions:
    """Numpy staging for the transitions of one training iteration ([train_freq * n_envs, ...])."""

    FIELDS = ("obs", "action", "reward", "next_obs", "terminated")

    def __init__(self, capacity: int, spec: EnvSpec):
        self.capacity = capacity
        self.obs = np.zeros((capacity, spec.obs_dim), np.float32)
        self.action = np.zeros((capacity, spec.action_dim), np.float32)
        self.reward = np.zeros(capacity, np.float32)
        self.next_obs = np.zeros((capacity, spec.obs_dim), np.float32)
        self.terminated = np.zeros(capacity, np.float32)
        self.count = 0

    @property
    def full(self) -> bool:
        return self.count == self.capacity

    def add(self, obs, action, reward, next_obs, terminated) -> None:
        rows = slice(self.count, self.count + len(reward))
        self.obs[rows], self.action[rows], self.reward[rows] = obs, action, reward
        self.next_obs[rows], self.terminated[rows] = next_obs, terminated
        self.count += len(reward)

    def take(self) -> Transition:
        self.count = 0
        # Copies: the arrays are refilled while the device may still be reading the last batch.
        return Transition(
            self.obs.copy(), self.action.copy(), self.reward.copy(), self.next_obs.copy(), self.terminated.copy()
        )


@dataclass
class EpisodeRecord:
    """How one env's current episode started ({"seed": s} or {"rng": bit-generator state}) and the
    actions it has taken since; None for an env that cannot be rebuilt this way."""

    start: dict[str, Any]
    actions: np.ndarray  # [steps, action_dim] float32, exactly as passed to env.step


@dataclass
class HostState:
    env_steps: int
    vector_steps: int
    episodes_at_last_log: int
    update_start: int  # updates run once env_steps > update_start (learning_starts, or later after a resume)
    best_mean_reward: float
    obs: np.ndarray  # [n_envs, obs_dim]: current observations
    next_action: np.ndarray | None  # the action the last update already chose for `obs`
    act_key: jax.Array  # typed PRNG key for acting
    warmup_rng: np.random.Generator  # uniform actions before learning_starts
    pending: PendingTransitions
    episodes: EpisodeTracker
    evaluations: Evaluations
    metrics: dict[str, Any]  # the last update's training metrics (device arrays until logged)

    def to_checkpoint(self, records: list[EpisodeRecord | None] | None) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        """(JSON part for the manifest, arrays stored as host/<name>.npy); `records` are the envs'
        episode records (None when the envs could not be asked)."""
        info = {
            "env_steps": self.env_steps,
            "vector_steps": self.vector_steps,
            "episodes_at_last_log": self.episodes_at_last_log,
            "update_start": self.update_start,
            "best_mean_reward": None if np.isneginf(self.best_mean_reward) else self.best_mean_reward,
            "warmup_rng": self.warmup_rng.bit_generator.state,  # the manifest's JSON writer takes numpy values
            "pending_count": self.pending.count,
            "metrics": host_metrics(self.metrics),
            "episode_starts": None if records is None else [None if r is None else r.start for r in records],
        }
        arrays = {
            "obs": self.obs,
            "act_key": np.asarray(jax.random.key_data(self.act_key)),
            "episode_returns": self.episodes.returns,
            "episode_lengths": self.episodes.lengths,
            "finished_returns": np.array(self.episodes.finished_returns, np.float64),
            "finished_lengths": np.array(self.episodes.finished_lengths, np.int64),
            **{
                f"pending_{name}": getattr(self.pending, name)[: self.pending.count]
                for name in PendingTransitions.FIELDS
            },
            **{f"eval_{name}": value for name, value in self.evaluations.arrays().items()},
        }
        if self.next_action is not None:
            arrays["next_action"] = np.asarray(self.next_action)
        for i, record in enumerate(records or []):
            if record is not None:
                arrays[f"episode_actions_{i}"] = record.actions
        return info, arrays

    @classmethod
    def from_checkpoint(
        cls, info: dict[str, Any], arrays: dict[str, np.ndarray], spec: EnvSpec, pending_capacity: int
    ) -> tuple[HostState, list[EpisodeRecord | None] | None]:
        """The host state, and the envs' episode records to replay (None: start new episodes)."""
        n_envs = len(arrays["obs"])
        rng = np.random.default_rng()
        rng.bit_generator.state = info["warmup_rng"]
        pending = PendingTransitions(pending_capacity, spec)
        count = int(info["pending_count"])
        for name in PendingTransitions.FIELDS:
            getattr(pending, name)[:count] = arrays[f"pending_{name}"]
        pending.count = count
        episodes = EpisodeTracker(n_envs)
        episodes.returns[:] = arrays["episode_returns"]
        episodes.lengths[:] = arrays["episode_lengths"]
        episodes.finished_returns = [float(x) for x in arrays["finished_returns"]]
        episodes.finished_lengths = [int(x) for x in arrays["finished_lengths"]]
        starts = info.get("episode_starts")
        records = (
            None
            if starts is None
            else [
                None if start is None else EpisodeRecord(start, arrays[f"episode_actions_{i}"])
                for i, start in enumerate(starts)
            ]
        )
        best = info["best_mean_reward"]
        host = cls(
            env_steps=int(info["env_steps"]),
            vector_steps=int(info["vector_steps"]),
            episodes_at_last_log=int(info["episodes_at_last_log"]),
            update_start=int(info["update_start"]),
            best_mean_reward=-np.inf if best is None else float(best),
            obs=arrays["obs"],
            next_action=arrays.get("next_action"),
            act_key=jax.random.wrap_key_data(arrays["act_key"]),
            warmup_rng=rng,
            pending=pending,
            episodes=episodes,
            evaluations=Evaluations.from_arrays({k[5:]: v for k, v in arrays.items() if k.startswith("eval_")}),
            metrics=dict(info.get("metrics") or {}),
        )
        return host, records


def host_metrics(metrics: dict[str, Any]) -> dict[str, float]:
    """Training metrics as Python floats: the device -> host transfer, done only when they are logged
    or checkpointed."""
    return {name: float(value) for name, value in jax.device_get(metrics).items()}
