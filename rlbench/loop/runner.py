"""The host loop: act -> env.step -> store -> (every train_freq vector steps) one fused update -> eval -> log.

This module holds no math. It is the only place in training that calls `jax.jit` (`policy.py` jits
acting for enjoy.py). A training iteration is one device call: it inserts the new transitions, runs
all of the iteration's gradient steps, and returns the action for the next env step from the
updated actor. Vector steps between training iterations
(train_freq > 1) make one call to act. Metrics stay on the device until a log interval asks for them.

Seeds: a run trains K seeds (run.seed, run.seed + 1, ...) as one learner with a leading seed axis
(`SeedAxis`): one compiled call per iteration for all of them, K x n_envs envs in one vector env, and
per seed its own outputs (`SeedOutput`: logger, run folder, checkpoints). A seed that diverges is
frozen at its last finite state and the others train on; with one seed, a divergence ends the run.

Counting follows SB3: `n_timesteps` counts env steps over all envs, `train_freq` counts vector
steps, actions are uniform random while fewer than `learning_starts` env steps were taken, and
training starts once more than `learning_starts` were. A `train_freq` in episodes (one env, one seed)
trains at the end of every train_freq-th episode instead: each vector step's transitions go to the
buffer as they come, and the rollout's gradient steps run in calls of one compiled length.
"""

from __future__ import annotations

import functools
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jax
import numpy as np
from gymnasium.vector import VectorEnv

from rlbench.algos.common import acting
from rlbench.algos.common.algorithm import Algorithm
from rlbench.algos.common.fused import make_train, make_update, steps_per_update
from rlbench.algos.common.learner import Learner
from rlbench.algos.common.seed_axis import SeedAxis
from rlbench.buffers.normalization import Normalization, normalize_obs
from rlbench.buffers.uniform import UniformBuffer, make_uniform_buffer
from rlbench.config.entry import RunConfig
from rlbench.envs.make import (
    close_vector_env,
    env_spec,
    final_observations,
    make_vector_env,
    step_vector_env,
)
from rlbench.envs.replay import episode_records
from rlbench.errors import DivergenceError, EnvWorkerError, EvaluationError, RunFailure
from rlbench.files import atomic_write_text
from rlbench.loggers.base import Logger
from rlbench.loggers.monitor import MonitorFiles
from rlbench.loop.evaluation import EvalResult, evaluate_groups
from rlbench.loop.finiteness import FiniteGuard
from rlbench.loop.saving import CheckpointSettings, RunCheckpoints, new_host_state, restore, restore_envs
from rlbench.store.checkpoint import Checkpoint
from rlbench.store.host_state import Evaluations, HostState
from rlbench.types import EnvSpec

ROLLOUT_METRICS = ("rollout/ep_rew_mean", "rollout/ep_len_mean", "time/episodes", "time/fps")
EVAL_METRICS = ("eval/mean_reward", "eval/std_reward", "eval/mean_ep_length")
DIVERGED_METRIC = "train/diverged"  # 1 in the last row of a seed that diverged (runs of several seeds)
EVAL_SEED_OFFSET = 10_000  # eval envs never share seeds with training envs
FAILED_FILE = "failed.txt"  # in the run folder of a seed that diverged: why, and its checkpoint


@dataclass(frozen=True)
class SeedOutput:
    """Where one seed's outputs go: its logger (progress.csv, TensorBoard, W&B), its run folder
    (evaluations.npz, Monitor files, failed.txt) and its checkpoints."""

    make_logger: Callable[[Sequence[str]], Logger]
    run_dir: Path | None = None
    checkpoints: CheckpointSettings | None = None


@dataclass
class TrainResult:
    state: Any  # learner state, with a leading seed axis when the run has several seeds
    buffer_state: Any
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


def train(
    run: RunConfig,
    algo: Algorithm,
    cfg: Any,
    make_logger: Callable[[Sequence[str]], Logger],
    run_dir: Path | None = None,
    on_eval: Callable[[int, EvalResult], None] | None = None,
    on_iteration: Callable[[int, Any], None] | None = None,
    checkpoints: CheckpointSettings | None = None,
    resume: Checkpoint | None = None,
    stop_requested: Callable[[], str | None] | None = None,
) -> TrainResult:
    """Train one seed (`run.seed`): `train_seeds` with a single SeedOutput (a one-seed run has no seed
    axis on the device: its state and buffer are exactly a single learner's)."""
    return train_seeds(
        run,
        algo,
        cfg,
        [SeedOutput(make_logger, run_dir, checkpoints)],
        on_eval=None if on_eval is None else lambda env_steps, results: on_eval(env_steps, results[0]),
        on_iteration=on_iteration,
        resume=None if resume is None else [resume],
        stop_requested=stop_requested,
    )


def train_seeds(
    run: RunConfig,
    algo: Algorithm,
    cfg: Any,
    outputs: Sequence[SeedOutput],
    on_eval: Callable[[int, list[EvalResult | None]], None] | None = None,
    on_iteration: Callable[[int, Any], None] | None = None,
    resume: Sequence[Checkpoint] | None = None,
    stop_requested: Callable[[], str | None] | None = None,
) -> TrainResult:
    """Train `algo` with `cfg` on `run.env_id`, one seed per output (run.seed, run.seed + 1, ...), until
    `run.n_timesteps` env steps per seed.

    `on_eval(env_steps, results)` follows each evaluation (one result per seed, None for a seed that
    failed); `on_iteration(env_steps, state)` follows each training iteration (benchmarks block on the
    state there to time steady-state throughput). `resume` continues from one checkpoint per seed;
    `stop_requested()` is polled once per vector step and, when it returns a reason, the loop writes every
    seed's checkpoint and returns with `interrupted` set. A failing env or evaluation, or a one-seed
    run's diverging learner, raises a RunFailure after writing the checkpoints.
    """
    n_seeds = len(outputs)
    env = make_vector_env(
        run.env_id,
        n_seeds * run.n_envs,
        run.vec_env,
        run.env_kwargs,
        run.env_wrappers,
        run.gym_packages,
        record_episodes=True,
    )
    eval_env = None
    failed = True
    try:
        spec = env_spec(env)
        if run.eval_freq > 0:
            eval_kwargs = run.env_kwargs if run.eval_env_kwargs is None else run.eval_env_kwargs
            eval_env = make_vector_env(
                run.env_id, n_seeds * run.n_eval_envs, "dummy", eval_kwargs, run.env_wrappers, run.gym_packages
            )
        loop = _Loop(run, cfg, spec, env, eval_env, algo, outputs)
        loop.start(resume)
        metric_names = [*ROLLOUT_METRICS, *EVAL_METRICS, *loop.learner.metric_names]
        if n_seeds > 1:
            metric_names.append(DIVERGED_METRIC)
        loggers = [output.make_logger(metric_names) for output in outputs]
        try:
            result = loop.train(loggers, on_eval, on_iteration, stop_requested)
        finally:
            for logger in loggers:
                logger.close()
        failed = False
        return result
    finally:
        close_vector_env(env, failed)
        if eval_env is not None:
            close_vector_env(eval_env, failed)


@dataclass(frozen=True)
class EntryPoints:
    """A run's compiled entry points, all of them, with the learner and buffer they were built for: each one
    call into the device. State and buffer are donated, so updates happen in place."""

    learner: Learner
    buffer: UniformBuffer
    init: Callable
    init_buffers: Callable
    act: Callable
    act_deterministic: Callable
    insert: Callable
    update: Callable  # one training iteration: insert, all its gradient steps, the next action
    train_some: Callable
    put_seed: Callable
    resample_exploration: Callable


# Recent runs' entry points by (learner factory, config, env spec, number of seeds): a run in the same
# process with the same four (a resume, an Optuna trial that repeats a configuration, the tests' in-process
# runs) calls the programs already traced and compiled instead of tracing, lowering and loading them again,
# 1-2 s per run on a CPU. A few only: each holds its compiled programs.
N_RECENT_ENTRY_POINTS = 4


def entry_points(algo: Algorithm, cfg: Any, spec: EnvSpec, n_seeds: int) -> EntryPoints:
    """The compiled entry points of `algo` with `cfg` on `spec` for `n_seeds` seeds: recent ones reused."""
    return _entry_points(algo.make_learner, cfg, spec, n_seeds)


@functools.lru_cache(maxsize=N_RECENT_ENTRY_POINTS)
def _entry_points(
    make_learner: Callable[[Any, EnvSpec], Learner], cfg: Any, spec: EnvSpec, n_seeds: int
) -> EntryPoints:
    axis = SeedAxis(n_seeds)
    buffer = make_uniform_buffer(cfg.buffer_size, spec)
    learner = make_learner(cfg, spec)
    update = make_update(cfg, buffer, learner.gradient_steps_fn)
    train = make_train(cfg, buffer, learner.gradient_steps_fn)

    def update_then_act(state, buffer_state, new, progress_remaining, obs, act_key, training, normalization):
        # All seeds advance in lockstep: one unbatched counter keeps the policy-delay branch a branch.
        first_step = axis.first(state.step)

        def one_seed(state, buffer_state, new, obs, act_key, training, normalization):
            # The next action comes out of the same call as the update: one dispatch per env step.
            updated, buffer_state, metrics = update(
                state, buffer_state, new, progress_remaining, first_step, normalization
            )
            if axis.batched:  # a seed that diverged stays at its last finite state
                updated = jax.lax.cond(training, lambda: updated, lambda: state)
            if cfg.gsde is not None:  # a rollout starts: new exploration matrices (gSDE)
                updated = acting.resample_exploration(updated)
            action, act_key = acting.act(updated, normalize_obs(obs, normalization), act_key)
            return updated, buffer_state, metrics, action, act_key

        return axis.map(one_seed)(state, buffer_state, new, obs, act_key, training, normalization)

    # The policy acts on observations scaled by the statistics of `normalize` (None: as the env gives them).
    def act(state, obs, act_key, normalization):
        return acting.act(state, normalize_obs(obs, normalization), act_key)

    def act_deterministic(state, obs, normalization):
        return acting.act_deterministic(state, normalize_obs(obs, normalization))

    def train_some(state, buffer_state, progress_remaining, normalization, n_steps):
        """train_freq in episodes (one seed): the first n_steps of steps_per_update(cfg) gradient steps."""
        return train(state, buffer_state, progress_remaining, state.step, normalization, n_steps)

    def put_seed(state, source, index):
        """`state` with seed `index`'s slice taken from `source` (both with the seed axis)."""
        return jax.tree.map(lambda to, of: to.at[index].set(of[index]), state, source)

    return EntryPoints(
        learner=learner,
        buffer=buffer,
        init=jax.jit(learner.init_fn),
        init_buffers=jax.jit(lambda: axis.broadcast(buffer.init_fn())),
        act=jax.jit(axis.map(act)),
        act_deterministic=jax.jit(axis.map(act_deterministic)),
        insert=jax.jit(axis.map(buffer.add_fn), donate_argnums=0),
        update=jax.jit(update_then_act, donate_argnums=(0, 1)),
        train_some=jax.jit(train_some, donate_argnums=0),
        put_seed=jax.jit(put_seed, donate_argnums=0),
        resample_exploration=jax.jit(axis.map(acting.resample_exploration), donate_argnums=0),
    )


class _Loop:
    """The host loop of a run's seeds: the compiled entry points, the learner states and replay buffers
    (with the seed axis), and the HostState. Resuming and writing checkpoints live in rlbench.loop.saving,
    the divergence checks in rlbench.loop.finiteness."""

    def __init__(
        self,
        run: RunConfig,
        cfg: Any,
        spec: EnvSpec,
        env: VectorEnv,
        eval_env: VectorEnv | None,
        algo: Algorithm,
        outputs: Sequence[SeedOutput],
    ):
        self.run, self.cfg, self.spec, self.env, self.eval_env = run, cfg, spec, env, eval_env
        self.outputs = list(outputs)
        self.axis = axis = SeedAxis(len(outputs))
        self.seeds = [run.seed + index for index in range(axis.n_seeds)]
        settings = [output.checkpoints for output in outputs]
        self.checkpoints = RunCheckpoints(None if None in settings else settings, axis, run.n_envs)
        self.guard = FiniteGuard(axis)

        self.episodic = cfg.train_freq_unit == "episode"
        if self.episodic and axis.batched:
            raise ValueError("train_freq in episodes trains each seed at its own episode ends: one seed per run")
        programs = entry_points(algo, cfg, spec, axis.n_seeds)
        self.learner, self.buffer = programs.learner, programs.buffer
        self.init, self.init_buffers, self.insert = programs.init, programs.init_buffers, programs.insert
        self.act, self.act_deterministic = programs.act, programs.act_deterministic
        self.update, self.train_some = programs.update, programs.train_some
        self.put_seed, self.resample_exploration = programs.put_seed, programs.resample_exploration

    def env_seeds(self, offset: int, n_envs: int) -> list[int]:
        """Each env's seed, seed after seed: env j of seed s gets s + offset + j (as env.reset(seed=s + offset)
        seeds a single run's envs)."""
        return [seed + offset + j for seed in self.seeds for j in range(n_envs)]

    def by_seed(self, flat: np.ndarray) -> np.ndarray:
        """[n_seeds * n, ...] -> [n_seeds, n, ...]: the vector env's rows, seed after seed."""
        return flat.reshape(self.axis.n_seeds, -1, *flat.shape[1:])

    # -- start and resume ----------------------------------------------------------------------------

    def start(self, resume: Sequence[Checkpoint] | None) -> None:
        run, cfg, spec, axis = self.run, self.cfg, self.spec, self.axis
        keys = [jax.random.split(jax.random.key(seed)) for seed in self.seeds]
        # Each seed's initial state from the one-seed init: seed i starts exactly as a single run with that seed.
        self.state = axis.stack([self.init(key) for key, _ in keys])
        act_key = axis.stack([act_key for _, act_key in keys])  # device layout: no seed axis for one seed
        self.buffer_state = self.init_buffers()
        obs = self.by_seed(self.env.reset(seed=self.env_seeds(0, run.n_envs))[0])
        capacity = (1 if self.episodic else cfg.train_freq) * run.n_envs  # one training iteration's transitions
        if resume is None:
            self.host = new_host_state(self.seeds, obs, act_key, spec, cfg.learning_starts, capacity, run.normalize)
        else:
            restored = restore(
                resume,
                self.seeds,
                axis.take(self.state, 0),
                self.buffer,
                spec,
                run.n_envs,
                capacity,
                obs,
                run.normalize,
            )
            self.state, self.host = axis.stack(restored.states), restored.host
            # The checkpoints' keys and actions, stacked per seed, in the device layout the loop passes on.
            self.host.act_key = axis.device(self.host.act_key)
            if self.host.next_action is not None:
                self.host.next_action = axis.device(self.host.next_action)
            if restored.buffer_states is not None:
                self.buffer_state = axis.stack(restored.buffer_states)
            else:
                self.host.update_start = max(self.host.update_start, self.host.env_steps + cfg.learning_starts)
                print(
                    f"{resume[0].path} holds no replay buffer: training resumes once {cfg.learning_starts} new "
                    f"transitions are collected (at {self.host.update_start} env steps); save one with "
                    "--save-replay-buffer for an exact continuation"
                )
            if restored.replay_envs:
                restore_envs(self.env, self.host, restored.records, self.env_seeds(self.host.env_steps, run.n_envs))
        self.training = axis.device(self.host.active)

    # -- the loop ------------------------------------------------------------------------------------

    def train(self, loggers, on_eval, on_iteration, stop_requested) -> TrainResult:
        host, run = self.host, self.run
        start, start_steps = time.perf_counter(), host.env_steps
        self.guard.start(host.env_steps, self.state, host.metrics)
        self.loggers, self.failed = loggers, {}
        interrupted, checkpoints = None, [None] * self.axis.n_seeds
        progress, self.rate = _progress_bar(run), TrainingRate()
        self.monitors = [
            None if output.run_dir is None else MonitorFiles(output.run_dir, run.n_envs, run.env_id)
            for output in self.outputs
        ]

        def keep(written: list[Path | None]) -> None:
            checkpoints[:] = [new or old for new, old in zip(written, checkpoints, strict=True)]

        try:
            with progress:
                task = progress.add_task(
                    "training", total=run.n_timesteps, completed=host.env_steps, rate="-", eta="-", last_eval="-"
                )
                # self.failed, not host.active: the loop's condition runs every env step, and it is a count.
                while host.env_steps < run.n_timesteps and len(self.failed) < self.axis.n_seeds:
                    if stop_requested is not None and (interrupted := stop_requested()):
                        break
                    keep(self._iteration(on_eval, on_iteration, progress, task, start, start_steps))
            self.state = jax.block_until_ready(self.state)
            if interrupted:  # a preemption notice leaves seconds: the buffer is stored uncompressed
                keep(self._save_periodic(with_buffer=True, urgent=True))
            elif host.active.any():
                keep(self._save("final", lambda settings: settings.run_dir / f"{settings.model_name}.zip"))
                if self.checkpoints.enabled:
                    self.checkpoints.write_normalization(host)
        except RunFailure as error:
            for note in self._save_after_failure(error):
                error.add_note(note)
            raise
        finally:
            for monitor in self.monitors:
                if monitor is not None:
                    monitor.close()
        return TrainResult(
            state=self.state,
            buffer_state=self.buffer_state,
            host=host,
            wall_time=time.perf_counter() - start,
            interrupted=interrupted,
            checkpoints=checkpoints,
            failed=dict(self.failed),
        )

    def _iteration(self, on_eval, on_iteration, progress, task, start, start_steps) -> list[Path | None]:
        """One vector step and what falls due after it: evaluation, logging, periodic checkpoints.
        Returns the checkpoint each seed wrote (None: none)."""
        run, host = self.run, self.host
        trained = self._vector_step()
        if trained and self.rate.start_steps is None:
            self.rate.start(host.env_steps)  # the first iteration, and its compilation, are behind us
        if self.eval_env is not None and host.vector_steps % max(run.eval_freq // run.n_envs, 1) == 0:
            results = self._evaluate()
            means = [result.mean for result in results if result is not None]
            if means:
                progress.update(task, last_eval=f"{np.mean(means):.1f}")
            if on_eval is not None:
                on_eval(host.env_steps, results)
        if on_iteration is not None and host.pending.count == 0:
            on_iteration(host.env_steps, self.state)
        self._log_due(start, start_steps)
        written: list[Path | None] = [None] * self.axis.n_seeds
        if self.checkpoints.enabled and self.checkpoints.periodic_due(host.vector_steps):
            written = self._save_periodic(with_buffer=None)
            self.checkpoints.prune()
        if run.progress:
            rate, eta = self.rate.rate(host.env_steps), self.rate.eta(host.env_steps, run.n_timesteps)
            progress.update(
                task,
                completed=host.env_steps,
                rate="-" if rate is None else f"{rate * self.axis.n_seeds:.0f}",  # env steps of all seeds
                eta="-" if eta is None else time.strftime("%H:%M:%S", time.gmtime(eta)),
            )
        return written

    def _vector_step(self) -> bool:
        """Act, step the envs, stage the transitions and, once train_freq vector steps are staged, train.
        Returns whether a training iteration ran."""
        cfg, host, axis, n_envs = self.cfg, self.host, self.axis, self.run.n_envs
        gsde = cfg.gsde
        if host.env_steps < cfg.learning_starts and not (gsde is not None and gsde.at_warmup):
            shape = (n_envs, self.spec.action_dim)
            action = np.stack([seed.warmup_rng.uniform(-1.0, 1.0, shape).astype(np.float32) for seed in host.seeds])
        else:
            if host.next_action is not None:  # from the update, with the rollout's new exploration matrices
                action = axis.host(host.next_action)
            else:
                if gsde is not None and acting.resample_due(self._vector_steps_in_rollout(), gsde):
                    self.state = self.resample_exploration(self.state)
                action, host.act_key = self.act(self.state, axis.device(host.obs), host.act_key, self.normalization())
                action = axis.host(action)
            if not np.isfinite(action).all():  # on the host already: a NaN actor never drives the envs
                self._verify_finite()  # raises for one seed; freezes the diverged seeds of several
                action = np.where(host.active[:, None, None], action, 0.0).astype(np.float32)  # frozen: one idle step
            if not np.isfinite(action).all():
                raise DivergenceError(
                    f"non-finite action at env step {host.env_steps} from a finite learner "
                    "state: the observations hold NaN or inf"
                )
        host.next_action = None
        next_obs, reward, terminated, truncated, infos = step_vector_env(
            self.env, action.reshape(self.env.num_envs, -1)
        )
        done = terminated | truncated
        real_next_obs = final_observations(next_obs, infos, done)
        host.pending.add(host.obs, action, self.by_seed(reward), self.by_seed(real_next_obs), self.by_seed(terminated))
        host.obs = self.by_seed(next_obs)
        if host.normalizer is not None:
            host.normalizer.observe_step(host.obs, self.by_seed(reward), self.by_seed(done))
        host.env_steps += n_envs
        host.vector_steps += 1
        for index, seed in enumerate(host.seeds):
            rows = slice(index * n_envs, (index + 1) * n_envs)
            for env_index, episode_return, length in seed.episodes.step(reward[rows], done[rows]):
                if self.monitors[index] is not None and seed.failed is None:
                    self.monitors[index].episode(env_index, episode_return, length)
        if not host.pending.full:
            return False
        batch = axis.device(host.pending.take())
        if self.episodic:
            self.buffer_state = self.insert(self.buffer_state, batch)
            return bool(done.any()) and self._train_after_episodes()
        if host.env_steps <= host.update_start:
            self.buffer_state = self.insert(self.buffer_state, batch)
            return False
        progress_remaining = np.float32(1.0 - host.env_steps / self.run.n_timesteps)
        obs = axis.device(host.obs)
        self.state, self.buffer_state, host.metrics, host.next_action, host.act_key = self.update(
            self.state,
            self.buffer_state,
            batch,
            progress_remaining,
            obs,
            host.act_key,
            self.training,
            self.normalization(),
        )
        return True

    def normalization(self) -> Normalization | None:
        """The statistics of `normalize` as they stand, for the device (None without `normalize`)."""
        normalizer = self.host.normalizer
        return None if normalizer is None else self.axis.device(normalizer.device())

    def _train_after_episodes(self) -> bool:
        """train_freq in episodes (SB3's TrainFreq(n, "episode"), one env and one seed), on an episode's last
        step: if it ends the train_freq-th episode of a rollout (counted from the start of the run) and
        training has started, run gradient_steps gradient steps, or with -1 as many as the rollout's env
        steps, in calls of steps_per_update(cfg). Returns whether it trained."""
        cfg, host = self.cfg, self.host
        lengths = host.seeds[0].episodes.finished_lengths
        if len(lengths) % cfg.train_freq != 0 or host.env_steps <= host.update_start:
            return False
        remaining = cfg.gradient_steps if cfg.gradient_steps > 0 else sum(lengths[-cfg.train_freq :])
        progress_remaining = np.float32(1.0 - host.env_steps / self.run.n_timesteps)
        while remaining > 0:
            n_steps = min(remaining, steps_per_update(cfg))
            self.state, host.metrics = self.train_some(
                self.state, self.buffer_state, progress_remaining, self.normalization(), np.int32(n_steps)
            )
            remaining -= n_steps
        host.next_action = None  # the next step acts with the trained policy
        return True

    def _vector_steps_in_rollout(self) -> int:
        """Vector steps into the current rollout (SB3's collect_rollouts), for gSDE's resampling: those staged
        for the next update with train_freq in steps; with train_freq in episodes (one env), the steps of the
        rollout's finished episodes and of the running one."""
        host = self.host
        if not self.episodic:
            return host.pending.count // self.run.n_envs
        episodes = host.seeds[0].episodes
        lengths = episodes.finished_lengths
        finished_in_rollout = len(lengths) % self.cfg.train_freq
        return sum(lengths[len(lengths) - finished_in_rollout :]) + int(episodes.lengths[0])

    def _log_due(self, start: float, start_steps: int) -> None:
        """Each training seed logs once log_interval more of its episodes have ended (SB3's rhythm)."""
        run, host = self.run, self.host
        due = [
            index
            for index, seed in enumerate(host.seeds)
            if run.log_interval > 0
            and seed.failed is None
            and len(seed.episodes.finished_returns) - seed.episodes_at_last_log >= run.log_interval
        ]
        if not due:
            return
        for index in due:
            host.seeds[index].episodes_at_last_log = len(host.seeds[index].episodes.finished_returns)
        metrics = self._verify_finite()
        fps = (host.env_steps - start_steps) / (time.perf_counter() - start)  # per seed, as a single run
        for index in due:
            seed = host.seeds[index]
            if seed.failed is None:
                values = {name: float(value[index]) for name, value in metrics.items()}
                summary = seed.episodes.summary(run.stats_window_size)
                self.loggers[index].log(summary | {"time/fps": fps} | values, host.env_steps)

    # -- divergence ----------------------------------------------------------------------------------

    def _verify_finite(self) -> dict[str, np.ndarray]:
        """The last training metrics ([n_seeds] each, on the host), after checking them and each training
        seed's learner state (FiniteGuard). A seed that diverged ends a one-seed run (DivergenceError); in a
        run of several it is frozen."""
        host = self.host
        metrics, diverged = self.guard.check(host.env_steps, self.state, host.metrics, host.active)
        if diverged and not self.axis.batched:
            raise DivergenceError(diverged[0])
        for index, message in diverged.items():
            self._freeze(index, message)
        return metrics

    def _freeze(self, index: int, message: str) -> None:
        """A seed of several diverged: write its checkpoint with its last finite state, mark it failed
        (failed.txt in its folder, a `train/diverged` row in its logs), and put its last finite state back
        on the device, where the update leaves it unchanged from now on."""
        host, seed, output = self.host, self.host.seeds[index], self.outputs[index]
        note = ""
        if self.checkpoints.enabled:
            note = self.checkpoints.write_after_failure(
                host,
                index,
                DivergenceError(message),
                None,
                self.buffer_state,
                episode_records(self.env),
                self.guard.verified,
            )
        seed.failed = self.failed[index] = message
        self.loggers[index].log({DIVERGED_METRIC: 1.0}, host.env_steps)
        if output.run_dir is not None:
            atomic_write_text(output.run_dir / FAILED_FILE, f"{message}\n{note}\n")
        self.state = self.put_seed(self.state, self.guard.verified.state, index)
        self.training = self.axis.device(host.active)
        print(
            f"Seed {seed.seed} diverged and is frozen ({message}); {note or 'no checkpoint'}. "
            f"{int(host.active.sum())} seed(s) train on",
            file=sys.stderr,
            flush=True,
        )

    # -- evaluation ----------------------------------------------------------------------------------

    def _evaluate(self) -> list[EvalResult | None]:
        """Every seed's policy at once on its own eval envs; the results of the seeds that train (None for
        a frozen one) are recorded, logged and checked for a new best model."""
        run, host, axis, n_seeds = self.run, self.host, self.axis, self.axis.n_seeds
        self._verify_finite()  # a diverged policy is not worth evaluating, nor a best_model
        eval_seeds = [
            seed.seed + EVAL_SEED_OFFSET + len(seed.evaluations.timesteps) + j
            for seed in host.seeds
            for j in range(run.n_eval_envs)
        ]

        normalization = self.normalization()  # frozen: evaluation reads the statistics, never updates them

        def policy(obs, state=self.state):
            obs = axis.device(obs.reshape(n_seeds, run.n_eval_envs, -1))
            actions = self.act_deterministic(state, obs, normalization)
            return axis.host(actions).reshape(len(obs), -1)

        try:
            results = evaluate_groups(policy, self.eval_env, n_seeds, run.eval_episodes, eval_seeds)
        except Exception as error:
            raise EvaluationError(f"evaluation at env step {host.env_steps} failed: {error}") from error
        recorded: list[EvalResult | None] = []
        for index, (seed, result) in enumerate(zip(host.seeds, results, strict=True)):
            if seed.failed is not None:  # a frozen policy's scores are not the seed's any more
                recorded.append(None)
                continue
            if not np.isfinite(result.returns).all():
                raise EvaluationError(
                    f"evaluation at env step {host.env_steps} returned non-finite episode returns "
                    f"{result.returns.tolist()} from a finite policy: check the env's rewards"
                )
            self._record_evaluation(index, result)
            recorded.append(result)
        if run.verbose and axis.batched:  # one line for all seeds; one seed prints its own
            means = [result.mean for result in recorded if result is not None]
            print(
                f"Eval num_timesteps={host.env_steps}, episode_reward over {len(means)} seeds: "
                f"mean {np.mean(means):.2f}, min {np.min(means):.2f}, max {np.max(means):.2f}",
                flush=True,  # a log file that someone tails, or a test waits on
            )
        return recorded

    def _record_evaluation(self, index: int, result: EvalResult) -> None:
        run, host, seed, output = self.run, self.host, self.host.seeds[index], self.outputs[index]
        seed.evaluations.append(host.env_steps, result.returns, result.lengths)
        if output.run_dir is not None:
            seed.evaluations.save(output.run_dir / "evaluations.npz")
        eval_metrics = {
            "eval/mean_reward": result.mean,
            "eval/std_reward": result.std,
            "eval/mean_ep_length": float(result.lengths.mean()),
        }
        self.loggers[index].log(eval_metrics, host.env_steps)
        single = not self.axis.batched
        if run.verbose and single:
            print(
                f"Eval num_timesteps={host.env_steps}, episode_reward={result.mean:.2f} +/- {result.std:.2f}",
                flush=True,
            )
        if result.mean > seed.best_mean_reward:
            seed.best_mean_reward = result.mean
            if output.checkpoints is not None:
                if run.verbose and single:
                    print("New best mean reward!")
                # Checked finite at the start of the evaluation; no buffer, no episode records needed.
                self.checkpoints.write_seed(
                    output.checkpoints.run_dir / "best_model.zip",
                    "best",
                    host,
                    index,
                    self.axis.take(self.state, index),
                    None,
                    episode_records(self.env),
                )

    # -- checkpoints ---------------------------------------------------------------------------------

    def _save(self, kind: str, path_of, with_buffer: bool | None = None, compress: bool = True) -> list[Path | None]:
        """Each training seed's checkpoint (its learner state checked finite first)."""
        if not self.checkpoints.enabled:
            return [None] * self.axis.n_seeds
        self._verify_finite()
        records = episode_records(self.env)
        return self.checkpoints.write(
            kind, path_of, self.host, self.state, self.buffer_state, records, with_buffer, compress
        )

    def _save_periodic(self, with_buffer: bool | None, urgent: bool = False) -> list[Path | None]:
        steps = self.host.env_steps
        return self._save(
            "interrupt" if urgent else "checkpoint",
            lambda settings: settings.run_dir / f"rl_model_{steps}_steps.zip",
            with_buffer=with_buffer,
            compress=not urgent,
        )

    def _save_after_failure(self, error: RunFailure) -> list[str]:
        """The checkpoint a failure leaves each training seed to resume from; the notes saying where."""
        if not self.checkpoints.enabled:
            return []
        records = None if isinstance(error, EnvWorkerError) else episode_records(self.env)
        return self.checkpoints.write_all_after_failure(
            self.host, error, self.state, self.buffer_state, records, self.guard.verified
        )


class TrainingRate:
    """Env steps per second and the time left, for the progress bar, measured from the end of the
    first training iteration: before it, random warm-up steps run far faster than training, and the
    iteration itself waits for compilation; either would make the rate and the ETA wrong for the run."""

    def __init__(self, clock: Callable[[], float] = time.perf_counter):
        self.clock = clock
        self.start_steps: int | None = None
        self.start_time = 0.0

    def start(self, env_steps: int) -> None:
        self.start_steps, self.start_time = env_steps, self.clock()

    def rate(self, env_steps: int) -> float | None:
        if self.start_steps is None or env_steps == self.start_steps:
            return None
        return (env_steps - self.start_steps) / max(self.clock() - self.start_time, 1e-9)

    def eta(self, env_steps: int, total: int) -> float | None:
        rate = self.rate(env_steps)
        return None if rate is None else (total - env_steps) / rate


def _progress_bar(run: RunConfig):
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    return Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[rate]} steps/s"),
        TextColumn("last eval {task.fields[last_eval]}"),
        TextColumn("ETA {task.fields[eta]}"),
        disable=not run.progress,
    )
