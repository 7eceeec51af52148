"""Training from a run's settings: `train_seeds` (one seed, or K seeds as one learner) builds the
envs, the compiled entry points, the loggers and the run's first state, then runs the host loop
(rlbench.loop.training_loop) and closes what it opened.

Counting follows SB3: `n_timesteps` counts env steps over all envs, `train_freq` counts vector steps,
actions are uniform random while fewer than `learning_starts` env steps were taken, and training starts
once more than `learning_starts` were (rlbench.loop.schedule).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence

from gymnasium.vector import VectorEnv

from rlbench.algos.common.config import LearnerConfig
from rlbench.config.algorithm import Algorithm
from rlbench.config.entry import RunConfig
from rlbench.envs.make import close_vector_env, env_spec, eval_vec_env, make_vector_env
from rlbench.loggers.monitor import MonitorFiles
from rlbench.loop.compiled import Carry, DeviceCarry, EntryPoints, entry_points
from rlbench.loop.divergence import DIVERGED_METRIC
from rlbench.loop.divergence_guard import DivergenceGuard
from rlbench.loop.metrics_log import EVAL_METRICS, ROLLOUT_METRICS
from rlbench.loop.run_state import LoopRun, SeedOutput, TrainResult
from rlbench.loop.saving import RunCheckpoints
from rlbench.loop.schedule import TrainSchedule
from rlbench.loop.start import start
from rlbench.loop.training_loop import OnEval, OnIteration, StopRequested, run_loop
from rlbench.store.checkpoint import Checkpoint
from rlbench.store.host_state import HostState
from rlbench.types import EnvSpec


def train_seeds(
    run: RunConfig,
    algo: Algorithm,
    cfg: LearnerConfig,
    outputs: Sequence[SeedOutput],
    on_eval: OnEval | None = None,
    on_iteration: OnIteration | None = None,
    resume: Sequence[Checkpoint] | None = None,
    stop_requested: StopRequested | None = None,
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
        run.env_id, n_seeds * run.n_envs, run.vec_env, run.env_kwargs, run.env_wrappers, run.gym_packages, True
    )
    eval_env = None
    failed = True
    try:
        if run.eval_freq > 0:
            eval_kwargs = run.env_kwargs if run.eval_env_kwargs is None else run.eval_env_kwargs
            eval_env = make_vector_env(
                run.env_id,
                n_seeds * run.n_eval_envs,
                eval_vec_env(run.vec_env),
                eval_kwargs,
                run.env_wrappers,
                run.gym_packages,
            )
        result = _train_on(run, algo, cfg, outputs, env, eval_env, resume, on_eval, on_iteration, stop_requested)
        failed = False
        return result
    finally:
        close_vector_env(env, failed)
        if eval_env is not None:
            close_vector_env(eval_env, failed)


def _train_on(
    run: RunConfig,
    algo: Algorithm,
    cfg: LearnerConfig,
    outputs: Sequence[SeedOutput],
    env: VectorEnv,
    eval_env: VectorEnv | None,
    resume: Sequence[Checkpoint] | None,
    on_eval: OnEval | None,
    on_iteration: OnIteration | None,
    stop_requested: StopRequested | None,
) -> TrainResult:
    """`train_seeds` on envs already built: the run's first state, its loggers and Monitor files, the loop."""
    spec, n_seeds = env_spec(env), len(outputs)
    programs = entry_points(algo, cfg, spec, n_seeds)
    schedule = TrainSchedule(cfg, programs.learner, run.n_envs, n_seeds)
    carry, host = start(run, spec, env, programs, schedule, resume)
    with opened_loop_run(run, spec, outputs, programs, schedule, carry, host, env, eval_env) as loop:
        return run_loop(loop, on_eval, on_iteration, stop_requested)


@contextlib.contextmanager
def opened_loop_run(
    run: RunConfig,
    spec: EnvSpec,
    outputs: Sequence[SeedOutput],
    programs: EntryPoints,
    schedule: TrainSchedule,
    carry: Carry | DeviceCarry,
    host: HostState,
    env: VectorEnv | None = None,
    eval_env: VectorEnv | None = None,
) -> Iterator[LoopRun]:
    """The run's record for either loop (envs None: they live on the device), with each seed's logger and
    Monitor file open (closed on the way out) and the run's checkpoint writer."""
    settings = [output.checkpoints for output in outputs if output.checkpoints is not None]
    saves = RunCheckpoints(settings if len(settings) == len(outputs) else None, programs.axis, run.n_envs)
    on_policy = ("time/iterations",) if programs.learner.collection.stages_rollout else ()  # SB3's rollouts count
    metric_names = [*ROLLOUT_METRICS, *on_policy, *EVAL_METRICS, *programs.learner.metric_names]
    if len(outputs) > 1:
        metric_names.append(DIVERGED_METRIC)
    loggers = [output.make_logger(metric_names) for output in outputs]
    monitors = [None if out.run_dir is None else MonitorFiles(out.run_dir, run.n_envs, run.env_id) for out in outputs]
    try:
        yield LoopRun(
            run=run,
            spec=spec,
            env=env,
            eval_env=eval_env,
            programs=programs,
            schedule=schedule,
            outputs=list(outputs),
            loggers=loggers,
            carry=carry,
            host=host,
            saves=saves,
            guard=DivergenceGuard(programs.axis),
            monitors=monitors,
        )
    finally:
        for logger in loggers:
            logger.close()
        for monitor in monitors:
            if monitor is not None:
                monitor.close()
