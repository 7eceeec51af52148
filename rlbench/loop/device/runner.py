"""Training on a JAX-native env (rlbench.envs.jax_native) with the device loop: `train_seeds_on_device` takes
what rlbench.loop.runner.train_seeds takes and returns what it returns, with the same run folder, logs,
Monitor files, evaluations and checkpoints; rlbench.run.launch picks it for a JAX-native env id.

What the device loop does not do yet is refused before anything is written (`device_loop_refusal`)."""

from __future__ import annotations

import functools
from collections.abc import Sequence

from rlbench.algos.common.config import LearnerConfig, ReplayConfig
from rlbench.algos.common.fused import steps_per_update
from rlbench.algos.common.learner import Collection
from rlbench.buffers.normalization import NormalizeConfig
from rlbench.config.algorithm import Algorithm
from rlbench.config.entry import RunConfig
from rlbench.envs.envpool_atari import pool_kwargs
from rlbench.envs.envpool_vector import envpool_env_id
from rlbench.envs.envpool_xla import EnvPoolXla
from rlbench.envs.jax_native.env import JaxEnv
from rlbench.envs.jax_native.ids import make_jax_env
from rlbench.envs.reported import reports_episodes
from rlbench.envs.wrappers import EnvWrapper
from rlbench.loop.compiled import EntryPoints, entry_points
from rlbench.loop.device.driver import DeviceRun, run_device_loop
from rlbench.loop.device.envs import device_envs
from rlbench.loop.device.program import DevicePrograms, RunShape, compile_device_programs
from rlbench.loop.device.start import start_on_device
from rlbench.loop.run_state import SeedOutput, TrainResult
from rlbench.loop.runner import opened_loop_run
from rlbench.loop.schedule import TrainSchedule
from rlbench.loop.training_loop import OnEval, OnIteration, StopRequested
from rlbench.store.checkpoint import Checkpoint

# A chunk's length in vector steps: about CHUNK_ENV_STEPS env steps (the host wakes at least that often, for
# signals and the progress bar), within [16, 1000] vector steps, and at most CHUNK_GRADIENT_STEPS gradient steps
# (gradient_steps: 64 with train_freq: 1 would otherwise take 64,000 in one call, which no signal interrupts).
# One compiled length per setting; a chunk that stops earlier (something falls due, the run ends) skips the
# rest of its scan. An evaluation's calls take the same number of env steps.
CHUNK_ENV_STEPS = 16_384
CHUNK_GRADIENT_STEPS = 1_000


def chunk_length(n_envs: int, gradient_steps: int = 0, train_freq: int = 1, rollout_steps: int = 0) -> int:
    """Vector steps of one chunk of `n_envs` envs that takes `gradient_steps` every `train_freq` vector steps,
    or, on-policy, whole rollouts of `rollout_steps` vector steps (at least one): a chunk then ends where a
    rollout does, and the partial rollout crosses to the host only when something falls due mid-rollout."""
    length = min(1000, max(16, CHUNK_ENV_STEPS // n_envs))
    if rollout_steps > 0:
        return max(1, length // rollout_steps) * rollout_steps
    if gradient_steps > 0:
        length = min(length, max(1, CHUNK_GRADIENT_STEPS * train_freq // gradient_steps))
    return length


def device_loop_refusal(
    vec_env: str,
    normalize: NormalizeConfig | None,
    env_wrappers: Sequence[EnvWrapper],
    collection: Collection,
    cfg: LearnerConfig,
) -> str | None:
    """Why a run's settings do not fit the device loop (one line: the setting and what to do), or None."""
    on_envpool = vec_env == "envpool-xla"
    if vec_env != "dummy" and not on_envpool:
        return f"--vec-env {vec_env}: a JAX-native env steps on the device, inside the training program; drop it"
    if normalize is not None:
        return "normalize: not available on the device loop yet; remove it from the entry" + (
            " or train with --vec-env envpool" if on_envpool else ""
        )
    if env_wrappers and not on_envpool:  # EnvPool's Atari pools take RL Zoo's AtariWrapper as their own options
        return "env_wrapper: gymnasium wrappers cannot wrap the device loop's envs; remove them"
    if collection.per_episode:
        assert isinstance(cfg, ReplayConfig), "train_freq in episodes is an off-policy learner's"
        return f"train_freq: {cfg.train_freq} episode(s): the device loop trains every train_freq vector steps"
    return None


def train_seeds_on_device(
    run: RunConfig,
    algo: Algorithm,
    cfg: LearnerConfig,
    outputs: Sequence[SeedOutput],
    on_eval: OnEval | None = None,
    on_iteration: OnIteration | None = None,
    resume: Sequence[Checkpoint] | None = None,
    stop_requested: StopRequested | None = None,
) -> TrainResult:
    """rlbench.loop.runner.train_seeds for a JAX-native env, or an EnvPool env with --vec-env envpool-xla: every
    seed and env in one compiled chunk."""
    n_seeds = len(outputs)
    eval_kwargs = run.env_kwargs if run.eval_env_kwargs is None else run.eval_env_kwargs
    env: JaxEnv | EnvPoolXla
    eval_env: JaxEnv | EnvPoolXla | None = None
    if run.vec_env == "envpool-xla":  # one pool per seed; closed when the run ends
        pool_id, games = envpool_env_id(run.env_id, run.vec_env), reports_episodes(run.env_wrappers)
        options = functools.partial(pool_kwargs, pool_id, run.env_wrappers)  # Atari's wrappers as pool options
        env = EnvPoolXla(pool_id, options(run.env_kwargs), n_seeds, run.n_envs, games)
        if run.eval_freq > 0:
            eval_env = EnvPoolXla(pool_id, options(eval_kwargs), n_seeds, run.n_eval_envs, games)
    else:
        env = make_jax_env(run.env_id, run.env_kwargs)
        if run.eval_freq > 0:
            eval_env = make_jax_env(run.env_id, eval_kwargs)
    try:
        return _train_on_device(run, algo, cfg, outputs, env, eval_env, on_eval, on_iteration, resume, stop_requested)
    finally:
        for pools in (env, eval_env):
            if isinstance(pools, EnvPoolXla):
                pools.close()


def _train_on_device(
    run: RunConfig,
    algo: Algorithm,
    cfg: LearnerConfig,
    outputs: Sequence[SeedOutput],
    env: JaxEnv | EnvPoolXla,
    eval_env: JaxEnv | EnvPoolXla | None,
    on_eval: OnEval | None,
    on_iteration: OnIteration | None,
    resume: Sequence[Checkpoint] | None,
    stop_requested: StopRequested | None,
) -> TrainResult:
    n_seeds = len(outputs)
    programs = entry_points(algo, cfg, env.spec, n_seeds)
    collection = programs.learner.collection
    if isinstance(env, EnvPoolXla) and collection.stages_rollout:
        env.use_pools_of(1)  # a rollout holds every env's every step: no env may take a reset step of its own
    if collection.stages_rollout:
        length = chunk_length(run.n_envs, rollout_steps=collection.vector_steps_per_update)
    else:
        assert isinstance(cfg, ReplayConfig), "a learner that stages no rollout is an off-policy one"
        length = chunk_length(run.n_envs, steps_per_update(cfg), cfg.train_freq)
    shape = RunShape(run.n_envs, collection.learning_starts, collection.vector_steps_per_update, length)
    if isinstance(env, EnvPoolXla):  # programs traced on EnvPool's pools step those pools only: never cached
        device = compile_programs(programs, cfg, env, eval_env, shape, run.n_eval_envs, run.eval_episodes)
    else:
        device = device_programs(programs, cfg, env, eval_env, shape, run.n_eval_envs, run.eval_episodes)
    carry, host = start_on_device(run, cfg, env.spec, programs, device, resume)
    schedule = TrainSchedule(cfg, programs.learner, run.n_envs, n_seeds)
    with opened_loop_run(run, env.spec, outputs, programs, schedule, carry, host) as loop:
        return run_device_loop(
            DeviceRun(loop, device, shape.chunk_length, chunk_length(run.n_eval_envs)),
            on_eval,
            on_iteration,
            stop_requested,
        )


@functools.lru_cache(maxsize=4)  # a resume or a repeated trial in the same process reuses the compiled programs
def device_programs(
    programs: EntryPoints,
    cfg: LearnerConfig,
    env: JaxEnv,
    eval_env: JaxEnv | None,
    shape: RunShape,
    n_eval_envs: int,
    n_eval_episodes: int,
) -> DevicePrograms:
    return compile_programs(programs, cfg, env, eval_env, shape, n_eval_envs, n_eval_episodes)


def compile_programs(
    programs: EntryPoints,
    cfg: LearnerConfig,
    env: JaxEnv | EnvPoolXla,
    eval_env: JaxEnv | EnvPoolXla | None,
    shape: RunShape,
    n_eval_envs: int,
    n_eval_episodes: int,
) -> DevicePrograms:
    axis = programs.axis
    return compile_device_programs(
        cfg,
        programs.learner,
        programs.learner.storage.replay,
        axis,
        device_envs(env, axis),
        None if eval_env is None else device_envs(eval_env, axis),
        shape,
        n_eval_envs,
        n_eval_episodes,
    )
