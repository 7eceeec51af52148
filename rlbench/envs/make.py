"""Building gymnasium vector environments the training loop can trust.

- Actions are rescaled from [-1, 1] to the Box bounds here, and only here (`RescaleAction` on each
  env): the learner, the buffer and the random warm-up all work in [-1, 1]. A Discrete env takes the
  action's index instead, in one action column (rlbench.envs.discrete), and is not rescaled. No other
  action space is accepted.
- Vector envs run in SAME_STEP autoreset mode: on an episode end `step` returns the first
  observation of the next episode, and the true final observation in `info["final_obs"]`, which the
  loop stores as `next_obs` so a truncated transition bootstraps from where it really ended.
- Subprocess workers start with forkserver: forking a process after JAX has started its threads
  can deadlock the child. Workers ignore SIGINT and SIGTERM: Ctrl-C, and a scheduler's SIGTERM
  (SLURM signals the whole process group), reach the workers too, and the trainer, not its envs,
  decides how to stop (it checkpoints first, which needs the envs). Workers are therefore stopped
  with SIGKILL after a failure, and exit by themselves when the trainer's end of their pipe closes.
- Training envs carry an `EpisodeRecorder` (rlbench.envs.episode_restore): a resumed run replays their episodes.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import multiprocessing
import os
import signal
import sys
import traceback
import warnings
from collections.abc import Iterator, Mapping, Sequence
from types import TracebackType
from typing import Any, cast

import gymnasium as gym
import numpy as np
from gymnasium.vector import AsyncVectorEnv, AutoresetMode, SyncVectorEnv, VectorEnv
from gymnasium.vector.async_vector_env import AsyncState

from rlbench.envs.atari import register_atari_envs
from rlbench.envs.bounds import unrescalable_bounds
from rlbench.envs.discrete import MAX_ACTIONS, IndexActions, action_count
from rlbench.envs.envpool_atari import pool_kwargs
from rlbench.envs.envpool_vector import EnvPoolEnv, EnvPoolVectorEnv, envpool_env_id, is_envpool
from rlbench.envs.episode_restore import EpisodeRecorder
from rlbench.envs.images import FlatImageBox, FlattenImage, is_image_space
from rlbench.envs.jax_native.gym_env import JaxGymEnv
from rlbench.envs.jax_native.ids import is_jax_native, make_jax_env
from rlbench.envs.reported import reports_episodes
from rlbench.envs.wrappers import EnvWrapper
from rlbench.errors import ConfigError, EnvWorkerError
from rlbench.types import EnvSpec, VecEnvKind

VEC_ENV_KINDS: tuple[VecEnvKind, ...] = ("dummy", "subproc", "envpool", "envpool-xla")
# What a vector env's step returns: (observations, rewards, terminated, truncated, infos), one row per env.
VectorStepResult = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]


def import_env_packages(env_id: str) -> None:
    """Register the env families an id refers to: PyBullet's `...BulletEnv-v0`, ale-py's Atari ids, and
    gymnasium's `module:EnvName-v0` form, which imports `module` (it registers its envs on import)."""
    if "Bullet" in env_id:
        import pybullet_envs_gymnasium  # noqa: F401  (registers the Bullet ids)
    register_atari_envs(env_id)
    if is_jax_native(env_id) or is_envpool(env_id):  # its prefix names a package, not a module registering envs
        return
    module, sep, _ = env_id.partition(":")
    if sep:
        if not all(part.isidentifier() for part in module.split(".")):  # importlib raises TypeError for "..", ".os"
            raise ConfigError(
                f"environment {env_id!r}: {module!r} is not a module name; expected module:EnvName-v0 with an "
                "importable module (e.g. my_package.envs:MyEnv-v0), or a registered id"
            )
        try:
            importlib.import_module(module)
        except ImportError as error:
            raise ConfigError(f"environment {env_id!r}: cannot import module {module!r} ({error})") from None


def env_file_name(env_id: str) -> str:
    """The env id as files and folders are named after it: `module:EnvId` -> `module_EnvId` (rlbench's run
    folders), and a namespace's `/` -> `-` (as RL Zoo's EnvironmentName), so `phys2d/Pendulum-v0` is one name."""
    return env_id.replace(":", "_").replace("/", "-")


def make_single_env(
    env_id: str,
    env_kwargs: Mapping[str, Any],
    wrappers: Sequence[EnvWrapper] = (),
    packages: Sequence[str] = (),
    record_episodes: bool = False,
    render_mode: str | None = None,
) -> gym.Env:
    """One env with flat float32 Box observations and a [-1, 1] Box action space (or a Discrete env's index).

    `wrappers` (checked by `rlbench.envs.wrappers.parse_env_wrappers`) wrap the env in order right after
    `gym.make`, as RL Zoo's env_wrapper; `packages` are imported first (they register custom envs, also in
    subprocesses).
    """
    worker = multiprocessing.parent_process() is not None
    if worker:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    for module in packages:
        importlib.import_module(module)
    import_env_packages(env_id)
    # AsyncVectorEnv built this env in the trainer first, which showed its warnings (an out-of-date -v4
    # id...) once; workers need not repeat them. (Not in the trainer: catch_warnings resets the "once" filter.)
    with warnings.catch_warnings() if worker else contextlib.nullcontext():
        if worker:
            warnings.simplefilter("ignore")
        if is_envpool(env_id):  # enjoy.py: Atari's wrappers only, as the pool's own options (rlbench.envs.checks)
            return EnvPoolEnv(env_id, pool_kwargs(env_id, wrappers, env_kwargs), reports_episodes(wrappers))
        if is_jax_native(env_id):  # the JAX env as a gymnasium env: the host loop, enjoy.py
            jax_env = make_jax_env(env_id, env_kwargs)
            if render_mode is not None and jax_env.render is None:
                raise ConfigError(
                    f"environment {env_id!r} does not render (no frames to record); Brax and MuJoCo Playground "
                    "envs render through MuJoCo's renderer"
                )
            env: gym.Env = JaxGymEnv(jax_env, render_mode=render_mode)
        else:
            render: dict[str, Any] = {"render_mode": render_mode} if render_mode else {}  # gym.make kwargs
            env = gym.make(env_id, **dict(env_kwargs), **render)
    if "Bullet" in env_id:
        env = QuietBulletConnect(env)
    for wrapper in wrappers:  # checked by rlbench.envs.wrappers: trusted classes, literal kwargs
        env = wrapper(env)
    env = flat_box_in_unit_actions(env, env_id)
    return EpisodeRecorder(env) if record_episodes else env


def flat_box_in_unit_actions(env: gym.Env, env_id: str) -> gym.Env:
    """`env` with flat Box observations and a [-1, 1] Box action space, or a Discrete env taking its action's
    index (rlbench.envs.discrete); ConfigError for other spaces."""
    if not isinstance(env.observation_space, gym.spaces.Box):
        raise ConfigError(f"{env_id}: rlbench needs a Box observation space, got {env.observation_space}")
    if is_image_space(env.observation_space):  # flat uint8 rows that remember the image's shape
        env = FlattenImage(env)
    elif len(env.observation_space.shape or ()) != 1:
        env = gym.wrappers.FlattenObservation(env)
    if isinstance(env.action_space, gym.spaces.Discrete):
        return index_actions(env, env_id)
    if not isinstance(env.action_space, gym.spaces.Box) or not np.issubdtype(env.action_space.dtype, np.floating):
        raise ConfigError(f"{env_id}: rlbench supports Box (float) and Discrete action spaces, got {env.action_space}")
    low, high = env.action_space.low, env.action_space.high
    if (unrescalable := unrescalable_bounds(low, high)) is not None:
        raise ConfigError(f"{env_id}: {unrescalable}")
    if not (np.all(low == -1.0) and np.all(high == 1.0)):
        ones = np.ones(env.action_space.shape, np.float32)  # float32 bounds: no precision warning
        env = gym.wrappers.RescaleAction(env, min_action=-ones, max_action=ones)
    return env


def index_actions(env: gym.Env, env_id: str) -> IndexActions:
    """A Discrete env taking its action's index; ConfigError for more actions than the index column holds."""
    action_space = cast(gym.spaces.Discrete, env.action_space)  # flat_box_in_unit_actions checked it
    if action_space.n > MAX_ACTIONS:
        raise ConfigError(
            f"{env_id}: {env.action_space} has more actions than rlbench's learners index exactly "
            f"(at most 2**{MAX_ACTIONS.bit_length() - 1}: the index travels as a float32)"
        )
    return IndexActions(env)


@contextlib.contextmanager
def native_stdout_silenced() -> Iterator[None]:
    """Send what native code writes to the process's stdout (fd 1) to /dev/null for the block."""
    sys.stdout.flush()
    saved, devnull = os.dup(1), os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 1)
        yield
    finally:
        os.dup2(saved, 1)
        os.close(saved)
        os.close(devnull)


class QuietBulletConnect(gym.Wrapper):
    """PyBullet envs connect to their physics server on their first reset, and its C code prints
    `argv[0]=` lines to stdout then, once per env: noise in every run's output. Only that reset is
    silenced (at the file-descriptor level, the print being native); later resets print nothing anyway."""

    def reset(self, **kwargs: Any) -> tuple[Any, dict[str, Any]]:  # (the wrapped env's observation, info)
        if getattr(self.unwrapped, "physicsClientId", 0) >= 0:  # already connected
            return super().reset(**kwargs)
        with native_stdout_silenced():
            return super().reset(**kwargs)


def original_spaces(env: gym.Env) -> tuple[gym.spaces.Box, gym.spaces.Box]:
    """(observation space, action space before rlbench's rescaling to [-1, 1]) of a single env. A Discrete
    env's is its index space, Box(0, n-1, (1,), int64): the manifest records its n that way."""
    action_space = env.action_space
    inner = env
    while isinstance(inner, gym.Wrapper):
        if isinstance(inner, gym.wrappers.RescaleAction):
            action_space = inner.env.action_space
            break
        inner = inner.env
    # Both Boxes: flat_box_in_unit_actions made them so (a Discrete env's action space is its index Box).
    return cast(gym.spaces.Box, env.observation_space), cast(gym.spaces.Box, action_space)


def make_vector_env(
    env_id: str,
    n_envs: int,
    vec_env: VecEnvKind,
    env_kwargs: Mapping[str, Any],
    wrappers: Sequence[EnvWrapper] = (),
    packages: Sequence[str] = (),
    record_episodes: bool = False,
) -> VectorEnv:
    if vec_env not in VEC_ENV_KINDS:
        raise ConfigError(f"--vec-env: unknown {vec_env!r}; valid: {', '.join(VEC_ENV_KINDS)}")
    if is_envpool(pool_id := envpool_env_id(env_id, vec_env)):
        if vec_env == "subproc":
            raise ConfigError(f"--vec-env subproc: {env_id} steps in EnvPool's own threads; drop --vec-env")
        # Checked by check_env_runs: Atari's wrappers only, as the pool's own options.
        return EnvPoolVectorEnv(pool_id, n_envs, pool_kwargs(pool_id, wrappers, env_kwargs), reports_episodes(wrappers))
    make = functools.partial(
        make_single_env, env_id, dict(env_kwargs), tuple(wrappers), tuple(packages), record_episodes
    )
    env_fns = [make] * n_envs
    if vec_env == "subproc":
        env: VectorEnv = AsyncVectorEnv(env_fns, context="forkserver", autoreset_mode=AutoresetMode.SAME_STEP)
    else:
        env = SyncVectorEnv(env_fns, autoreset_mode=AutoresetMode.SAME_STEP)
    check_autoreset_mode(env)
    return env


def eval_vec_env(vec_env: VecEnvKind) -> VecEnvKind:
    """The evaluation envs' kind: in-process, or EnvPool's own pool when the run trains on EnvPool."""
    return "envpool" if vec_env.startswith("envpool") else "dummy"


def check_autoreset_mode(env: VectorEnv) -> None:
    """The loop reads `final_obs` on the step that ends an episode: only SAME_STEP provides that."""
    mode = env.metadata.get("autoreset_mode")
    if mode != AutoresetMode.SAME_STEP:
        raise ConfigError(
            f"vector env autoreset mode {mode!r} is not supported: the training loop is written for "
            f"{AutoresetMode.SAME_STEP!r} (final observation in info['final_obs'] on the ending step)"
        )


def env_spec(env: VectorEnv) -> EnvSpec:
    # Boxes, as every env make_single_env builds has (flat_box_in_unit_actions).
    observation_space = cast(gym.spaces.Box, env.single_observation_space)
    action_space = cast(gym.spaces.Box, env.single_action_space)
    return EnvSpec(
        obs_dim=int(np.prod(observation_space.shape)),
        action_dim=int(np.prod(action_space.shape)),
        n_actions=action_count(str(action_space.dtype), action_space.high.ravel()),
        image_shape=observation_space.image_shape if isinstance(observation_space, FlatImageBox) else (),
    )


def step_vector_env(env: VectorEnv, actions: np.ndarray) -> VectorStepResult:
    """`env.step` that turns a failing env into an EnvWorkerError naming its index: an in-process env
    that raised, or a subprocess worker that raised (gymnasium prints its traceback) or died."""
    try:
        return env.step(actions)
    except Exception as error:
        if not isinstance(env, AsyncVectorEnv):
            index, env_frames = _failed_sync_env(error)
            name = "environment" if index is None else f"environment {index}"
            # As gymnasium does for a subprocess worker: the env's own frames, for whoever debugs it.
            print(f"Traceback of {name}:", file=sys.stderr)
            traceback.print_exception(type(error), error, env_frames, file=sys.stderr)
            raise EnvWorkerError(
                f"{name} raised {type(error).__name__}: {error} (its traceback is printed above)"
            ) from error
        failed = [i for i, pipe in enumerate(env.parent_pipes) if pipe is None]  # gymnasium's mark
        if isinstance(error, EOFError | ConnectionError):  # a worker's pipe closed: wait for its exit code
            for proc in env.processes:
                proc.join(timeout=1.0)
        exit_codes = {i: code for i, proc in enumerate(env.processes) if (code := proc.exitcode) is not None}
        dead = [i for i in exit_codes if i not in failed]
        detail = ", ".join(
            f"worker {i}" + (" raised" if i in failed else f" exited with code {_exit_code(exit_codes[i])}")
            for i in sorted(set(failed) | set(dead))
        )
        if dead and not failed:  # the parent only saw the pipe close; a killed worker sends no traceback
            raise EnvWorkerError(f"environment {detail} failed") from error
        # A worker that raised sent its traceback, which gymnasium has logged.
        where = " (the worker's traceback is printed above)" if failed else ""
        raise EnvWorkerError(
            f"environment {detail or 'worker'} failed: {type(error).__name__}: {error}{where}"
        ) from error


def _exit_code(code: int) -> str:
    """-9 -> "-9 (SIGKILL)": multiprocessing's negative exit codes are the signals that ended a process."""
    try:
        return f"{code} ({signal.Signals(-code).name})" if code < 0 else str(code)
    except ValueError:
        return str(code)


def _failed_sync_env(error: BaseException) -> tuple[int | None, TracebackType | None]:
    """(index of the env whose step raised inside SyncVectorEnv.step: its loop variable `i`, the
    traceback from that env's frames on)."""
    frame = error.__traceback__
    while frame is not None:
        if frame.tb_frame.f_code is SyncVectorEnv.step.__code__:
            index = frame.tb_frame.f_locals.get("i")
            return (index if isinstance(index, int) else None), frame.tb_next
        frame = frame.tb_next
    return None, error.__traceback__


def close_vector_env(env: VectorEnv, failed: bool) -> None:
    """Close; after a failure, kill subprocess workers instead of waiting on a broken step."""
    if failed and isinstance(env, AsyncVectorEnv):
        # gymnasium's close first waits for the pending step, which re-raises the worker's failure
        # (EOFError from a dead one); nothing is pending any more once the step has failed. Its
        # terminate sends SIGTERM, which the workers ignore: kill them first.
        env._state = AsyncState.DEFAULT
        for process in env.processes:
            if process.is_alive():
                process.kill()
        env.close(terminate=True)
    else:
        env.close()


def final_observations(next_obs: np.ndarray, infos: Mapping[str, Any], done: np.ndarray) -> np.ndarray:
    """next_obs with each ended episode's row replaced by its true final observation."""
    if not done.any():
        return next_obs
    real_next_obs = next_obs.copy()
    final_obs = infos["final_obs"]
    for i in np.flatnonzero(done):
        real_next_obs[i] = final_obs[i]
    return real_next_obs
