"""The host loop: act -> env.step -> store -> (every train_freq vector steps) one fused update -> eval -> log.

This module holds no math. It is the only place that calls `jax.jit`. A training iteration is one
device call: it inserts the new transitions, runs all of the iteration's gradient steps, and returns
the action for the next env step from the updated actor. Vector steps between training iterations
(train_freq > 1) make one call to act. Metrics stay on the device until a log interval asks for them.

Counting follows SB3: `n_timesteps` counts env steps over all envs, `train_freq` counts vector
steps, actions are uniform random while fewer than `learning_starts` env steps were taken, and
training starts once more than `learning_starts` were.
"""

from __future__ import annotations

import io
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jax
import numpy as np

from rlbench.buffers.uniform import bytes_per_transition, make_uniform_buffer
from rlbench.config import RunConfig
from rlbench.envs.make import (
    close_vector_env,
    env_spec,
    final_observations,
    make_vector_env,
    step_vector_env,
)
from rlbench.errors import ConfigError
from rlbench.evaluation import EvalResult, evaluate
from rlbench.files import atomic_write_bytes
from rlbench.loggers.base import Logger
from rlbench.registry import AlgoSpec
from rlbench.types import EnvSpec, Transition

ROLLOUT_METRICS = ("rollout/ep_rew_mean", "rollout/ep_len_mean", "time/episodes", "time/fps")
EVAL_METRICS = ("eval/mean_reward", "eval/std_reward", "eval/mean_ep_length")
EVAL_SEED_OFFSET = 10_000  # eval envs never share seeds with training envs


@dataclass
class Evaluations:
    """RL Zoo's evaluations.npz: timesteps [n_evals], results and ep_lengths [n_evals, n_episodes]."""

    timesteps: list[int] = field(default_factory=list)
    results: list[np.ndarray] = field(default_factory=list)
    ep_lengths: list[np.ndarray] = field(default_factory=list)

    def append(self, step: int, result: EvalResult) -> None:
        self.timesteps.append(step)
        self.results.append(result.returns)
        self.ep_lengths.append(result.lengths)

    def save(self, path: Path) -> None:
        buffer = io.BytesIO()
        np.savez(buffer, timesteps=np.array(self.timesteps), results=np.array(self.results),
                 ep_lengths=np.array(self.ep_lengths))
        atomic_write_bytes(path, buffer.getvalue())


@dataclass
class TrainResult:
    state: Any
    buffer_state: Any
    env_steps: int
    episode_returns: list[float]
    evaluations: Evaluations
    wall_time: float


def available_memory_bytes() -> int | None:
    """Memory a new device buffer can use: free accelerator memory, or the host's MemAvailable."""
    device = jax.devices()[0]
    if device.platform != "cpu":
        stats = device.memory_stats() or {}
        if "bytes_limit" in stats:
            return int(stats["bytes_limit"] - stats.get("bytes_in_use", 0))
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def check_buffer_memory(capacity: int, spec: EnvSpec, verbose: int) -> None:
    """Print the replay buffer's size, and refuse (exit 2) one that cannot fit before allocating it."""
    per_row = bytes_per_transition(spec)
    total = capacity * per_row
    available = available_memory_bytes()
    if verbose:
        print(f"Replay buffer: {capacity:,} transitions x {per_row} B = {total / 2**20:,.1f} MiB "
              f"on {jax.devices()[0].platform}")
    if available is not None and total > available:
        raise ConfigError(
            f"replay buffer needs {total / 2**30:.2f} GiB ({capacity:,} x {per_row} B) but only "
            f"{available / 2**30:.2f} GiB is available; lower buffer_size (e.g. -params buffer_size:"
            f"{max(1, int(available * 0.8) // per_row)})"
        )


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
        self.lengths = np.zeros(self.n_envs, dtype=int)

    def step(self, reward: np.ndarray, done: np.ndarray) -> int:
        """Account one vector step; returns how many episodes ended."""
        self.returns += reward
        self.lengths += 1
        ended = np.flatnonzero(done)
        for i in ended:
            self.finished_returns.append(float(self.returns[i]))
            self.finished_lengths.append(int(self.lengths[i]))
            self.returns[i] = 0.0
            self.lengths[i] = 0
        return len(ended)

    def summary(self, window: int = 100) -> dict[str, float]:
        if not self.finished_returns:
            return {"time/episodes": 0.0}
        return {
            "rollout/ep_rew_mean": float(np.mean(self.finished_returns[-window:])),
            "rollout/ep_len_mean": float(np.mean(self.finished_lengths[-window:])),
            "time/episodes": float(len(self.finished_returns)),
        }


def train(
    run: RunConfig,
    algo: AlgoSpec,
    cfg: Any,
    make_logger: Callable[[Sequence[str]], Logger],
    run_dir: Path | None = None,
    on_eval: Callable[[int, EvalResult], None] | None = None,
    on_iteration: Callable[[int, Any], None] | None = None,
) -> TrainResult:
    """Train `algo` with `cfg` on `run.env_id` for `run.n_timesteps` env steps.

    `on_eval(env_steps, result)` follows each evaluation; `on_iteration(env_steps, state)` follows
    each training iteration (benchmarks block on the state there to time steady-state throughput).
    """
    env = make_vector_env(run.env_id, run.n_envs, run.vec_env, run.env_kwargs, run.env_wrappers, run.gym_packages)
    eval_env = None
    failed = True
    try:
        spec = env_spec(env)
        check_buffer_memory(cfg.buffer_size, spec, verbose=0)  # also here for callers other than train.py
        if run.eval_freq > 0:
            eval_kwargs = run.env_kwargs if run.eval_env_kwargs is None else run.eval_env_kwargs
            eval_env = make_vector_env(run.env_id, run.n_eval_envs, "dummy", eval_kwargs, run.env_wrappers,
                                       run.gym_packages)
        hooks = (on_eval, on_iteration)
        result = _train_loop(run, algo, cfg, spec, env, eval_env, make_logger, run_dir, hooks)
        failed = False
        return result
    finally:
        close_vector_env(env, failed)
        if eval_env is not None:
            close_vector_env(eval_env, failed)


def _train_loop(run, algo, cfg, spec, env, eval_env, make_logger, run_dir, hooks) -> TrainResult:
    buffer = make_uniform_buffer(cfg.buffer_size, spec)
    learner = algo.make_learner(cfg, spec, buffer)
    logger = make_logger([*ROLLOUT_METRICS, *EVAL_METRICS, *learner.metric_names])
    try:
        return _run(run, cfg, spec, env, eval_env, learner, buffer, logger, run_dir, hooks)
    finally:
        logger.close()


def _run(run, cfg, spec, env, eval_env, learner, buffer, logger, run_dir, hooks) -> TrainResult:
    on_eval, on_iteration = hooks
    key, act_key = jax.random.split(jax.random.key(run.seed))
    state = jax.jit(learner.init_fn)(key)
    buffer_state = buffer.init_fn()

    def update_then_act(state, buffer_state, new, progress_remaining, obs, act_key):
        # The next action comes out of the same call as the update: one dispatch per env step.
        state, buffer_state, metrics = learner.update_fn(state, buffer_state, new, progress_remaining)
        action, act_key = learner.act_fn(state, obs, act_key)
        return state, buffer_state, metrics, action, act_key

    # The compiled entry points, all of them: state and buffer are donated, so updates happen in place.
    act = jax.jit(learner.act_fn)
    act_deterministic = jax.jit(learner.act_deterministic_fn)
    insert = jax.jit(buffer.add_fn, donate_argnums=0)
    update = jax.jit(update_then_act, donate_argnums=(0, 1))

    rng = np.random.default_rng(run.seed)  # warm-up actions
    n_envs = run.n_envs
    pending = PendingTransitions(cfg.train_freq * n_envs, spec)
    episodes = EpisodeTracker(n_envs)
    evaluations = Evaluations()
    eval_every = max(run.eval_freq // n_envs, 1)
    metrics: dict[str, jax.Array] = {}
    env_steps, vector_steps, episodes_at_last_log = 0, 0, 0
    next_action = None  # computed by the last update, for the current obs
    start = time.perf_counter()
    obs, _ = env.reset(seed=run.seed)
    progress = _progress_bar(run)
    with progress:
        task = progress.add_task("training", total=run.n_timesteps, fps=0.0, last_eval="-")
        while env_steps < run.n_timesteps:
            if env_steps < cfg.learning_starts:
                action = rng.uniform(-1.0, 1.0, (n_envs, spec.action_dim)).astype(np.float32)
            elif next_action is not None:
                action = np.asarray(next_action)
            else:
                action, act_key = act(state, obs, act_key)
                action = np.asarray(action)
            next_action = None
            next_obs, reward, terminated, truncated, infos = step_vector_env(env, action)
            done = terminated | truncated
            pending.add(obs, action, reward, final_observations(next_obs, infos, done), terminated)
            obs = next_obs
            env_steps += n_envs
            vector_steps += 1
            episodes.step(reward, done)

            if pending.full:
                batch = pending.take()
                if env_steps > cfg.learning_starts:
                    progress_remaining = np.float32(1.0 - env_steps / run.n_timesteps)
                    state, buffer_state, metrics, next_action, act_key = update(
                        state, buffer_state, batch, progress_remaining, obs, act_key)
                else:
                    buffer_state = insert(buffer_state, batch)
                if on_iteration is not None:
                    on_iteration(env_steps, state)

            if eval_env is not None and vector_steps % eval_every == 0:
                def policy(o, state=state):
                    return np.asarray(act_deterministic(state, o))

                eval_seed = run.seed + EVAL_SEED_OFFSET + len(evaluations.timesteps)
                result = evaluate(policy, eval_env, run.eval_episodes, seed=eval_seed)
                _record_evaluation(run, run_dir, evaluations, logger, env_steps, result)
                progress.update(task, last_eval=f"{result.mean:.1f}")
                if on_eval is not None:
                    on_eval(env_steps, result)

            n_episodes = len(episodes.finished_returns)
            if run.log_interval > 0 and n_episodes - episodes_at_last_log >= run.log_interval:
                episodes_at_last_log = n_episodes
                fps = env_steps / (time.perf_counter() - start)
                logger.log(episodes.summary() | {"time/fps": fps} | _host_metrics(metrics), env_steps)
            if run.progress:
                progress.update(task, completed=env_steps, fps=env_steps / (time.perf_counter() - start))

    state = jax.block_until_ready(state)
    return TrainResult(state=state, buffer_state=buffer_state, env_steps=env_steps,
                       episode_returns=episodes.finished_returns, evaluations=evaluations,
                       wall_time=time.perf_counter() - start)


def _record_evaluation(run, run_dir, evaluations, logger, env_steps, result) -> None:
    evaluations.append(env_steps, result)
    if run_dir is not None:
        evaluations.save(run_dir / "evaluations.npz")
    logger.log({"eval/mean_reward": result.mean, "eval/std_reward": result.std,
                "eval/mean_ep_length": float(result.lengths.mean())}, env_steps)
    if run.verbose:
        print(f"Eval num_timesteps={env_steps}, episode_reward={result.mean:.2f} +/- {result.std:.2f}")


def _host_metrics(metrics: dict[str, jax.Array]) -> dict[str, float]:
    """The only device -> host transfer of training metrics: once per log interval."""
    return {name: float(value) for name, value in jax.device_get(metrics).items()}


class PendingTransitions:
    """Numpy staging for the transitions of one training iteration ([train_freq * n_envs, ...])."""

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
        return Transition(self.obs.copy(), self.action.copy(), self.reward.copy(),
                          self.next_obs.copy(), self.terminated.copy())


def _progress_bar(run: RunConfig):
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    return Progress(
        TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
        TextColumn("{task.fields[fps]:.0f} steps/s"), TextColumn("last eval {task.fields[last_eval]}"),
        TimeRemainingColumn(), disable=not run.progress,
    )
