"""The host loop: act -> env.step -> store -> (every train_freq vector steps) one fused update -> eval -> log.

This module holds no math. It is the only place in training that calls `jax.jit` (`policy.py` jits
acting for enjoy.py). A training iteration is one device call: it inserts the new transitions, runs
all of the iteration's gradient steps, and returns the action for the next env step from the
updated actor. Vector steps between training iterations
(train_freq > 1) make one call to act. Metrics stay on the device until a log interval asks for them.

Counting follows SB3: `n_timesteps` counts env steps over all envs, `train_freq` counts vector
steps, actions are uniform random while fewer than `learning_starts` env steps were taken, and
training starts once more than `learning_starts` were.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from rlbench.algos.common.finite import all_finite, non_finite_paths
from rlbench.buffers.uniform import buffer_from_arrays, buffer_to_arrays, make_uniform_buffer
from rlbench.checkpoint import (
    Checkpoint,
    prune_periodic_checkpoints,
    state_from_bytes,
    state_to_bytes,
    write_checkpoint,
)
from rlbench.config import RunConfig
from rlbench.envs.make import (
    close_vector_env,
    env_spec,
    episode_records,
    final_observations,
    make_vector_env,
    restore_episodes,
    step_vector_env,
)
from rlbench.errors import ConfigError, DivergenceError, EnvWorkerError, EvaluationError, RunFailure
from rlbench.evaluation import EvalResult, evaluate
from rlbench.loggers.base import Logger
from rlbench.loggers.monitor import MonitorFiles
from rlbench.loop_state import EpisodeTracker, Evaluations, HostState, PendingTransitions, host_metrics
from rlbench.memory import check_buffer_memory
from rlbench.registry import AlgoSpec

ROLLOUT_METRICS = ("rollout/ep_rew_mean", "rollout/ep_len_mean", "time/episodes", "time/fps")
EVAL_METRICS = ("eval/mean_reward", "eval/std_reward", "eval/mean_ep_length")
EVAL_SEED_OFFSET = 10_000  # eval envs never share seeds with training envs


@dataclass(frozen=True)
class CheckpointSettings:
    """Where and when the loop writes checkpoints (all of them resumable with `train.py -i`).

    - `rl_model_<steps>_steps.zip` every `save_freq` env steps (the newest `keep` kept; 0 keeps all),
      with the replay buffer when `save_replay_buffer`;
    - `best_model.zip` at each new best evaluation (no buffer);
    - `<model_name>.zip` at the end (buffer when `save_replay_buffer`);
    - `rl_model_<steps>_steps.zip` when stopped by a signal or a failure (an env, an evaluation, a
      divergence), always with the buffer: that checkpoint exists to be resumed. After a divergence it
      holds the last learner state found finite, and its manifest says from which env step.
    No checkpoint ever holds a NaN or inf learner state.
    """

    run_dir: Path
    model_name: str
    manifest: Mapping[str, Any]  # the run's static description: algo, env, seed, hyperparameters, spaces
    save_freq: int = -1
    keep: int = 0
    save_replay_buffer: bool = False


@dataclass
class TrainResult:
    state: Any
    buffer_state: Any
    host: HostState
    wall_time: float
    interrupted: str | None = None  # the signal's name when a stop was requested
    checkpoint: Path | None = None  # the last checkpoint written (the final model, or the interrupt one)

    @property
    def env_steps(self) -> int:
        return self.host.env_steps

    @property
    def episode_returns(self) -> list[float]:
        return self.host.episodes.finished_returns

    @property
    def evaluations(self) -> Evaluations:
        return self.host.evaluations


def train(
    run: RunConfig,
    algo: AlgoSpec,
    cfg: Any,
    make_logger: Callable[[Sequence[str]], Logger],
    run_dir: Path | None = None,
    on_eval: Callable[[int, EvalResult], None] | None = None,
    on_iteration: Callable[[int, Any], None] | None = None,
    checkpoints: CheckpointSettings | None = None,
    resume: Checkpoint | None = None,
    stop_requested: Callable[[], str | None] | None = None,
) -> TrainResult:
    """Train `algo` with `cfg` on `run.env_id` until `run.n_timesteps` env steps in total.

    `on_eval(env_steps, result)` follows each evaluation; `on_iteration(env_steps, state)` follows
    each training iteration (benchmarks block on the state there to time steady-state throughput).
    `resume` continues from a checkpoint; `stop_requested()` is polled once per vector step and,
    when it returns a reason, the loop writes a checkpoint and returns with `interrupted` set.
    A failing env or evaluation, or a diverging learner, raises a RunFailure after writing a checkpoint
    (when `checkpoints` is given); `run_dir` also receives evaluations.npz and SB3 Monitor files.
    """
    env = make_vector_env(
        run.env_id, run.n_envs, run.vec_env, run.env_kwargs, run.env_wrappers, run.gym_packages, record_episodes=True
    )
    eval_env = None
    failed = True
    try:
        spec = env_spec(env)
        check_buffer_memory(cfg.buffer_size, spec, verbose=0)  # also here for callers other than train.py
        if run.eval_freq > 0:
            eval_kwargs = run.env_kwargs if run.eval_env_kwargs is None else run.eval_env_kwargs
            eval_env = make_vector_env(
                run.env_id, run.n_eval_envs, "dummy", eval_kwargs, run.env_wrappers, run.gym_packages
            )
        buffer = make_uniform_buffer(cfg.buffer_size, spec)
        learner = algo.make_learner(cfg, spec, buffer)
        loop = _Loop(run, cfg, spec, env, eval_env, learner, buffer, run_dir, checkpoints)
        loop.start(resume)
        logger = make_logger([*ROLLOUT_METRICS, *EVAL_METRICS, *learner.metric_names])
        try:
            result = loop.train(logger, on_eval, on_iteration, stop_requested)
        finally:
            logger.close()
        failed = False
        return result
    finally:
        close_vector_env(env, failed)
        if eval_env is not None:
            close_vector_env(eval_env, failed)


class _Loop:
    """One run's host loop: the compiled entry points, the learner state, the buffer and HostState."""

    def __init__(self, run, cfg, spec, env, eval_env, learner, buffer, run_dir, checkpoints):
        self.run, self.cfg, self.spec, self.env, self.eval_env = run, cfg, spec, env, eval_env
        self.learner, self.buffer, self.run_dir, self.checkpoints = learner, buffer, run_dir, checkpoints

        def update_then_act(state, buffer_state, new, progress_remaining, obs, act_key):
            # The next action comes out of the same call as the update: one dispatch per env step.
            state, buffer_state, metrics = learner.update_fn(state, buffer_state, new, progress_remaining, state.step)
            action, act_key = learner.act_fn(state, obs, act_key)
            return state, buffer_state, metrics, action, act_key

        # The compiled entry points, all of them: state and buffer are donated, so updates happen in place.
        self.init = jax.jit(learner.init_fn)
        self.act = jax.jit(learner.act_fn)
        self.act_deterministic = jax.jit(learner.act_deterministic_fn)
        self.insert = jax.jit(buffer.add_fn, donate_argnums=0)
        self.update = jax.jit(update_then_act, donate_argnums=(0, 1))
        self.all_finite = jax.jit(all_finite)
        self.copy_state = jax.jit(lambda state: jax.tree.map(jnp.copy, state))  # survives the next donation

    def start(self, resume: Checkpoint | None) -> None:
        run, cfg, spec = self.run, self.cfg, self.spec
        key, act_key = jax.random.split(jax.random.key(run.seed))
        self.state = self.init(key)
        self.buffer_state = self.buffer.init_fn()
        obs, _ = self.env.reset(seed=run.seed)
        pending_capacity = cfg.train_freq * run.n_envs
        if resume is None:
            self.host = HostState(
                env_steps=0,
                vector_steps=0,
                episodes_at_last_log=0,
                update_start=cfg.learning_starts,
                best_mean_reward=-np.inf,
                obs=obs,
                next_action=None,
                act_key=act_key,
                warmup_rng=np.random.default_rng(run.seed),
                pending=PendingTransitions(pending_capacity, spec),
                episodes=EpisodeTracker(run.n_envs),
                evaluations=Evaluations(),
                metrics={},
            )
            return
        try:
            self.state = state_from_bytes(self.state, resume.state_bytes)
            buffer_arrays = resume.group("replay_buffer")
            if buffer_arrays:
                self.buffer_state = buffer_from_arrays(self.buffer, buffer_arrays)
        except ValueError as error:
            raise ConfigError(f"cannot resume from {resume.path}: {error}") from None
        saved = resume.group("host")
        if len(saved["obs"]) != run.n_envs or int(resume.manifest["host"]["pending_count"]) > pending_capacity:
            # n_envs changed: counters, learner and buffer carry over; episodes and pending steps cannot.
            print(
                f"Resuming with n_envs={run.n_envs} (saved: {len(saved['obs'])}): episodes in progress "
                "restart, and transitions collected since the last update are dropped"
            )
            info = {**resume.manifest["host"], "pending_count": 0, "episode_starts": None}
            saved = {
                **saved,
                "obs": obs,
                "episode_returns": np.zeros(run.n_envs),
                "episode_lengths": np.zeros(run.n_envs, np.int64),
            }
            saved.pop("next_action", None)
            self.host, _ = HostState.from_checkpoint(info, saved, spec, pending_capacity)
        else:
            self.host, records = HostState.from_checkpoint(resume.manifest["host"], saved, spec, pending_capacity)
            self._restore_envs(records)
        if not buffer_arrays:
            self.host.update_start = max(self.host.update_start, self.host.env_steps + cfg.learning_starts)
            print(
                f"{resume.path} holds no replay buffer: training resumes once {cfg.learning_starts} new "
                f"transitions are collected (at {self.host.update_start} env steps); save one with "
                "--save-replay-buffer for an exact continuation"
            )

    def _restore_envs(self, records) -> None:
        """Put each training env back where it was; envs that cannot be rebuilt start new episodes."""
        host = self.host
        if records is None:
            obs, _ = self.env.reset(seed=self.run.seed + host.env_steps)  # not the first episodes again
            restored = np.zeros(self.run.n_envs, bool)
        else:
            obs, restored = restore_episodes(self.env, records, host.obs)
        if not restored.all():
            print(
                f"Envs {np.flatnonzero(~restored).tolist()} could not be restored exactly (no record, or "
                "a replay that differs: a non-deterministic env); they start new episodes"
            )
            for i in np.flatnonzero(~restored):
                host.episodes.restart(i)
            host.next_action = None  # chosen for observations some envs no longer show
        host.obs = obs

    def train(self, logger, on_eval, on_iteration, stop_requested) -> TrainResult:
        host = self.host
        start = time.perf_counter()
        start_steps = host.env_steps
        self.verified = _Verified(host.env_steps, self.copy_state(self.state), host_metrics(host.metrics))
        interrupted, last_checkpoint = None, None
        progress = _progress_bar(self.run)
        self.rate = TrainingRate()
        self.monitor = None if self.run_dir is None else MonitorFiles(self.run_dir, self.run.n_envs, self.run.env_id)
        try:
            with progress:
                task = progress.add_task(
                    "training", total=self.run.n_timesteps, completed=host.env_steps, rate="-", eta="-", last_eval="-"
                )
                while host.env_steps < self.run.n_timesteps:
                    if stop_requested is not None and (interrupted := stop_requested()):
                        break
                    last_checkpoint = (
                        self._iteration(logger, on_eval, on_iteration, progress, task, start, start_steps)
                        or last_checkpoint
                    )
            self.state = jax.block_until_ready(self.state)
            if self.checkpoints is not None:
                if interrupted:  # a preemption notice leaves seconds: the buffer is stored uncompressed
                    last_checkpoint = self._save_periodic(with_buffer=True, urgent=True)
                else:
                    last_checkpoint = self.checkpoints.run_dir / f"{self.checkpoints.model_name}.zip"
                    self._save(last_checkpoint, "final", with_buffer=self.checkpoints.save_replay_buffer)
        except RunFailure as error:
            if self.checkpoints is not None:
                error.add_note(self._save_after_failure(error))
            raise
        finally:
            if self.monitor is not None:
                self.monitor.close()
        return TrainResult(
            state=self.state,
            buffer_state=self.buffer_state,
            host=host,
            wall_time=time.perf_counter() - start,
            interrupted=interrupted,
            checkpoint=last_checkpoint,
        )

    def _iteration(self, logger, on_eval, on_iteration, progress, task, start, start_steps) -> Path | None:
        """One vector step and what falls due after it: evaluation, logging, a periodic checkpoint."""
        run, host = self.run, self.host
        trained = self._vector_step()
        if trained and self.rate.start_steps is None:
            self.rate.start(host.env_steps)  # the first iteration, and its compilation, are behind us
        if self.eval_env is not None and host.vector_steps % max(run.eval_freq // run.n_envs, 1) == 0:
            result = self._evaluate(logger)
            progress.update(task, last_eval=f"{result.mean:.1f}")
            if on_eval is not None:
                on_eval(host.env_steps, result)
        if on_iteration is not None and host.pending.count == 0:
            on_iteration(host.env_steps, self.state)
        n_episodes = len(host.episodes.finished_returns)
        if run.log_interval > 0 and n_episodes - host.episodes_at_last_log >= run.log_interval:
            host.episodes_at_last_log = n_episodes
            fps = (host.env_steps - start_steps) / (time.perf_counter() - start)
            logger.log(host.episodes.summary() | {"time/fps": fps} | self._verify_finite(), host.env_steps)
        checkpoint = None
        if (
            self.checkpoints is not None
            and self.checkpoints.save_freq > 0
            and host.vector_steps % max(self.checkpoints.save_freq // run.n_envs, 1) == 0
        ):
            checkpoint = self._save_periodic(with_buffer=self.checkpoints.save_replay_buffer)
            prune_periodic_checkpoints(self.checkpoints.run_dir, self.checkpoints.keep)
        if run.progress:
            rate, eta = self.rate.rate(host.env_steps), self.rate.eta(host.env_steps, run.n_timesteps)
            progress.update(
                task,
                completed=host.env_steps,
                rate="-" if rate is None else f"{rate:.0f}",
                eta="-" if eta is None else time.strftime("%H:%M:%S", time.gmtime(eta)),
            )
        return checkpoint

    def _vector_step(self) -> bool:
        """Act, step the envs, stage the transitions and, once train_freq vector steps are staged, train.
        Returns whether a training iteration ran."""
        cfg, host = self.cfg, self.host
        if host.env_steps < cfg.learning_starts:
            action = host.warmup_rng.uniform(-1.0, 1.0, (self.run.n_envs, self.spec.action_dim)).astype(np.float32)
        else:
            if host.next_action is not None:
                action = np.asarray(host.next_action)
            else:
                action, host.act_key = self.act(self.state, host.obs, host.act_key)
                action = np.asarray(action)
            if not np.isfinite(action).all():  # on the host already: a NaN actor never drives the envs
                self._verify_finite()
                raise DivergenceError(
                    f"non-finite action at env step {host.env_steps} from a finite learner "
                    "state: the observations hold NaN or inf"
                )
        host.next_action = None
        next_obs, reward, terminated, truncated, infos = step_vector_env(self.env, action)
        done = terminated | truncated
        host.pending.add(host.obs, action, reward, final_observations(next_obs, infos, done), terminated)
        host.obs = next_obs
        host.env_steps += self.run.n_envs
        host.vector_steps += 1
        for index, episode_return, length in host.episodes.step(reward, done):
            if self.monitor is not None:
                self.monitor.episode(index, episode_return, length)
        if not host.pending.full:
            return False
        batch = host.pending.take()
        if host.env_steps <= host.update_start:
            self.buffer_state = self.insert(self.buffer_state, batch)
            return False
        progress_remaining = np.float32(1.0 - host.env_steps / self.run.n_timesteps)
        self.state, self.buffer_state, host.metrics, host.next_action, host.act_key = self.update(
            self.state, self.buffer_state, batch, progress_remaining, host.obs, host.act_key
        )
        return True

    def _verify_finite(self) -> dict[str, float]:
        """The learner's last metrics as floats, after checking them and the learner state for NaN and inf.

        Called where the metrics come to the host anyway (log intervals, evaluations, checkpoints), so it
        costs one small reduction there. A passing check keeps a device copy of the learner state: what
        a checkpoint written after a divergence holds instead of the diverged one.
        """
        host = self.host
        metrics = host_metrics(host.metrics)
        # NaN metrics are normal: an iteration without an actor step reports NaN actor losses.
        infinite = [name for name, value in metrics.items() if np.isinf(value)]
        if bool(self.all_finite(self.state)) and not infinite:
            if self.verified.env_steps != host.env_steps:
                self.verified = _Verified(host.env_steps, self.copy_state(self.state), metrics)
            return metrics
        paths = non_finite_paths(self.state)
        where = [", ".join(infinite)] if infinite else []
        if paths:
            where.append(
                f"learner state {', '.join(paths[:3])}"
                + (f" and {len(paths) - 3} more arrays" if len(paths) > 3 else "")
            )
        last = (
            ", ".join(f"{name}={value:.4g}" for name, value in self.verified.metrics.items() if not np.isnan(value))
            or "none logged yet"
        )  # NaN: no actor step in that iteration
        raise DivergenceError(
            f"training diverged at env step {host.env_steps}: non-finite {'; '.join(where)}. Last finite check at "
            f"env step {self.verified.env_steps}: {last}. Lower learning_rate, or check the env's rewards"
        )

    def _evaluate(self, logger) -> EvalResult:
        run, host = self.run, self.host
        self._verify_finite()  # a diverged policy is not worth evaluating, nor a best_model

        def policy(o, state=self.state):
            return np.asarray(self.act_deterministic(state, o))

        eval_seed = run.seed + EVAL_SEED_OFFSET + len(host.evaluations.timesteps)
        try:
            result = evaluate(policy, self.eval_env, run.eval_episodes, seed=eval_seed)
        except Exception as error:
            raise EvaluationError(f"evaluation at env step {host.env_steps} failed: {error}") from error
        if not np.isfinite(result.returns).all():
            raise EvaluationError(
                f"evaluation at env step {host.env_steps} returned non-finite episode returns "
                f"{result.returns.tolist()} from a finite policy: check the env's rewards"
            )
        host.evaluations.append(host.env_steps, result.returns, result.lengths)
        if self.run_dir is not None:
            host.evaluations.save(self.run_dir / "evaluations.npz")
        logger.log(
            {
                "eval/mean_reward": result.mean,
                "eval/std_reward": result.std,
                "eval/mean_ep_length": float(result.lengths.mean()),
            },
            host.env_steps,
        )
        if run.verbose:
            print(f"Eval num_timesteps={host.env_steps}, episode_reward={result.mean:.2f} +/- {result.std:.2f}")
        if result.mean > host.best_mean_reward:
            host.best_mean_reward = result.mean
            if self.checkpoints is not None:
                if run.verbose:
                    print("New best mean reward!")
                self._save(self.checkpoints.run_dir / "best_model.zip", "best", with_buffer=False)
        return result

    def _save_after_failure(self, error: RunFailure) -> str:
        """Write the checkpoint a failure leaves to resume from; returns the note saying where (or why not)."""
        host, state, extra = self.host, self.state, {}
        if isinstance(error, DivergenceError):
            state = self.verified.state
            host.metrics, host.next_action = self.verified.metrics, None  # the next action came from NaN
            extra = {
                "divergence": {
                    "detected_at_env_steps": host.env_steps,
                    "learner_state_from_env_steps": self.verified.env_steps,
                }
            }
        path = self.checkpoints.run_dir / f"rl_model_{host.env_steps}_steps.zip"
        try:
            self._save(
                path,
                "failure",
                with_buffer=True,
                envs_usable=not isinstance(error, EnvWorkerError),
                compress=False,
                state=state,
                extra=extra,
            )
        except (OSError, RunFailure) as save_error:
            return f"no checkpoint written: {save_error}"
        if isinstance(error, DivergenceError):
            return f"checkpoint with the learner state from env step {self.verified.env_steps}: {path}"
        return f"checkpoint written before the failure: {path}"

    def _save_periodic(self, with_buffer: bool, urgent: bool = False) -> Path:
        path = self.checkpoints.run_dir / f"rl_model_{self.host.env_steps}_steps.zip"
        self._save(path, "interrupt" if urgent else "checkpoint", with_buffer, compress=not urgent)
        return path

    def _save(
        self,
        path: Path,
        kind: str,
        with_buffer: bool,
        envs_usable: bool = True,
        compress: bool = True,
        state: Any = None,
        extra: Mapping[str, Any] | None = None,
    ) -> None:
        """Write a checkpoint of `state` (default: the current learner state, checked finite first)."""
        host = self.host
        if state is None:
            self._verify_finite()
            state = self.state
        info, host_arrays = host.to_checkpoint(episode_records(self.env) if envs_usable else None)
        arrays = {f"host/{name}": value for name, value in host_arrays.items()}
        if with_buffer:
            arrays |= {f"replay_buffer/{name}": value for name, value in buffer_to_arrays(self.buffer_state).items()}
        non_finite = [
            name
            for name, value in arrays.items()
            if np.issubdtype(value.dtype, np.inexact) and not np.isfinite(value).all()
        ]
        if non_finite:  # stored from the envs' own outputs: no learner state can be swapped in for them
            raise EnvWorkerError(
                f"the environments returned NaN or inf ({', '.join(non_finite)}); {path.name} is not written with them"
            )
        manifest = {
            **self.checkpoints.manifest,
            "kind": kind,
            "host": info,
            "replay_buffer": with_buffer,
            **(extra or {}),
            "counters": {
                "env_steps": host.env_steps,
                "gradient_steps": int(state.step),
                "episodes": len(host.episodes.finished_returns),
            },
        }
        try:
            write_checkpoint(path, manifest, state_to_bytes(state), arrays, compress=compress)
        except OSError as error:  # disk full, quota, permissions: the previous checkpoints are intact
            raise OSError(error.errno, f"could not write checkpoint {path}: {error.strerror or error}") from error


@dataclass
class _Verified:
    """The learner state at the last passing finiteness check (a device copy), with its metrics."""

    env_steps: int
    state: Any
    metrics: dict[str, float]


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
