"""When the loop trains, and when the exploration state is redrawn (gSDE's matrices), as SB3 counts them.

The learner says when it trains (`Learner.collection`): an off-policy learner's `train_freq`, an on-policy
learner's rollout of `n_steps` vector steps (no warm-up: it trains on every full rollout).

`train_freq` counts vector steps: the transitions of train_freq vector steps are staged, then one fused
training iteration inserts them and trains, once more than `learning_starts` env steps were taken (or
later after a resume without a replay buffer: `HostState.update_start`). Actions are uniform random while
fewer than `learning_starts` env steps were taken, unless the algorithm's acting explores instead (gSDE's
`use_sde_at_warmup`).

A `train_freq` in episodes (SB3's TrainFreq(n, "episode"), one env and one seed) trains at the end of
every train_freq-th episode instead: each vector step's transitions go to the buffer as they come, and the
rollout's gradient steps run in calls of one compiled length (`steps_per_update`).
"""

from __future__ import annotations

from rlbench.algos.common.config import LearnerConfig, ReplayConfig
from rlbench.algos.common.fused import steps_per_update
from rlbench.algos.common.learner import Learner
from rlbench.store.host_state import HostState
from rlbench.types import PyTree


class TrainSchedule:
    def __init__(self, cfg: LearnerConfig, learner: Learner[PyTree], n_envs: int, n_seeds: int):
        self.cfg, self.acting, self.n_envs = cfg, learner.acting, n_envs
        self.collection = learner.collection
        self.episodic = self.collection.per_episode
        if self.episodic and n_seeds > 1:
            raise ValueError("train_freq in episodes trains each seed at its own episode ends: one seed per run")

    @property
    def episodic_config(self) -> ReplayConfig:
        """The config of a learner that trains at episode ends (train_freq in episodes): an off-policy one's."""
        assert isinstance(self.cfg, ReplayConfig), "train_freq in episodes is an off-policy learner's"
        return self.cfg

    @property
    def staging_capacity(self) -> int:
        """The transitions staged for one training iteration (all envs of a seed)."""
        return (1 if self.episodic else self.collection.vector_steps_per_update) * self.n_envs

    def random_actions(self, host: HostState) -> bool:
        """Whether this vector step acts uniformly at random (the warm-up before learning_starts)."""
        return host.env_steps < self.collection.learning_starts and self.acting.random_warmup

    def resample_due(self, host: HostState) -> bool:
        """Whether the exploration state is redrawn before this vector step acts (gSDE: `Acting.resample_due`).
        A training iteration draws it itself for the step that follows it."""
        return self.acting.resample_due(self.vector_steps_in_rollout(host))

    def fused_update_due(self, host: HostState) -> bool:
        """With the staging full: whether one fused iteration (insert, train, act) runs, rather than an insert."""
        return not self.episodic and host.env_steps > host.update_start

    def gradient_step_calls(self, host: HostState, episode_ended: bool) -> list[int]:
        """train_freq in episodes, after the transitions are inserted: the gradient steps of each training call
        due now (none: no call). Due when this vector step ends the train_freq-th episode of a rollout (counted
        from the start of the run) and training has started: gradient_steps of them, or with -1 as many as
        the rollout's env steps, in calls of steps_per_update(cfg)."""
        if not (self.episodic and episode_ended):
            return []
        cfg = self.episodic_config
        lengths = host.seeds[0].episodes.finished_lengths
        if len(lengths) % cfg.train_freq != 0:
            return []
        if host.env_steps <= host.update_start:
            return []
        remaining = cfg.gradient_steps if cfg.gradient_steps > 0 else sum(lengths[-cfg.train_freq :])
        per_call = steps_per_update(cfg)
        return [min(per_call, remaining - done) for done in range(0, remaining, per_call)]

    def vector_steps_in_rollout(self, host: HostState) -> int:
        """Vector steps into the current rollout (SB3's collect_rollouts): those staged for the next update
        with train_freq in steps; with train_freq in episodes (one env), the steps of the rollout's finished
        episodes and of the running one."""
        if not self.episodic:
            return host.pending.count // self.n_envs
        episodes = host.seeds[0].episodes
        lengths = episodes.finished_lengths
        finished_in_rollout = len(lengths) % self.episodic_config.train_freq
        return sum(lengths[len(lengths) - finished_in_rollout :]) + int(episodes.lengths[0])
