"""Building gymnasium vector environments the training loop can trust.

- Actions are rescaled from [-1, 1] to the Box bounds here, and only here (`RescaleAction` on each
  env): the learner, the buffer and the random warm-up all work in [-1, 1].
- Vector envs run in SAME_STEP autoreset mode: on an episode end `step` returns the first
  observation of the next episode, and the true final observation in `info["final_obs"]`, which the
  loop stores as `next_obs` so a truncated transition bootstraps from where it really ended.
- Subprocess workers start with forkserver: forking a process after JAX has started its threads
  can deadlock the child.
"""

from __future__ import annotations

import difflib
import functools
import importlib
from collections.abc import Mapping, Sequence
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.vector import AsyncVectorEnv, AutoresetMode, SyncVectorEnv, VectorEnv
from gymnasium.vector.async_vector_env import AsyncState

from rlbench.errors import ConfigError, EnvWorkerError
from rlbench.types import EnvSpec

VEC_ENV_KINDS = ("dummy", "subproc")


def import_env_packages(env_id: str) -> None:
    """Register the env families an id refers to: PyBullet's `...BulletEnv-v0`, and gymnasium's
    `module:EnvName-v0` form, which imports `module` (it registers its envs on import)."""
    if "Bullet" in env_id:
        import pybullet_envs_gymnasium  # noqa: F401  (registers the Bullet ids)
    module, sep, _ = env_id.partition(":")
    if sep:
        try:
            importlib.import_module(module)
        except ImportError as error:
            raise ConfigError(f"environment {env_id!r}: cannot import module {module!r} ({error})") from None


def check_env_id(env_id: str) -> None:
    """ConfigError with a did-you-mean suggestion when gymnasium does not know `env_id`."""
    import_env_packages(env_id)
    if env_id.partition(":")[2] in gym.registry or env_id in gym.registry:
        return
    close = difflib.get_close_matches(env_id, list(gym.registry), n=3)
    hint = f"; did you mean {', '.join(close)}?" if close else ""
    raise ConfigError(f"environment {env_id!r} not found in the gymnasium registry{hint}")


def make_single_env(
    env_id: str,
    env_kwargs: Mapping[str, Any],
    wrappers: Sequence[tuple[str, Mapping[str, Any]]] = (),
    packages: Sequence[str] = (),
) -> gym.Env:
    """One env with flat float32 Box observations and a [-1, 1] Box action space.

    `wrappers` (dotted class path, kwargs) wrap the env in order right after `gym.make`, as RL Zoo's
    env_wrapper; `packages` are imported first (they register custom envs, also in subprocesses).
    """
    for module in packages:
        importlib.import_module(module)
    import_env_packages(env_id)
    env = gym.make(env_id, **dict(env_kwargs))
    for path, kwargs in wrappers:
        module_name, _, name = path.rpartition(".")
        env = getattr(importlib.import_module(module_name), name)(env, **dict(kwargs))
    if not isinstance(env.action_space, gym.spaces.Box):
        raise ConfigError(f"{env_id}: rlbench's learners need a continuous (Box) action space, got {env.action_space}")
    if not isinstance(env.observation_space, gym.spaces.Box):
        raise ConfigError(f"{env_id}: rlbench needs a Box observation space, got {env.observation_space}")
    if len(env.observation_space.shape) != 1:
        env = gym.wrappers.FlattenObservation(env)
    low, high = env.action_space.low, env.action_space.high
    if not (np.all(np.isfinite(low)) and np.all(np.isfinite(high))):
        raise ConfigError(f"{env_id}: action bounds must be finite to rescale from [-1, 1], got {env.action_space}")
    if not (np.all(low == -1.0) and np.all(high == 1.0)):
        ones = np.ones(env.action_space.shape, np.float32)  # float32 bounds: no precision warning
        env = gym.wrappers.RescaleAction(env, min_action=-ones, max_action=ones)
    return env


def make_vector_env(
    env_id: str,
    n_envs: int,
    vec_env: str,
    env_kwargs: Mapping[str, Any],
    wrappers: Sequence[tuple[str, Mapping[str, Any]]] = (),
    packages: Sequence[str] = (),
) -> VectorEnv:
    if vec_env not in VEC_ENV_KINDS:
        raise ConfigError(f"--vec-env: unknown {vec_env!r}; valid: {', '.join(VEC_ENV_KINDS)}")
    make = functools.partial(make_single_env, env_id, dict(env_kwargs), tuple(wrappers), tuple(packages))
    env_fns = [make] * n_envs
    if vec_env == "subproc":
        env: VectorEnv = AsyncVectorEnv(env_fns, context="forkserver", autoreset_mode=AutoresetMode.SAME_STEP)
    else:
        env = SyncVectorEnv(env_fns, autoreset_mode=AutoresetMode.SAME_STEP)
    check_autoreset_mode(env)
    return env


def check_autoreset_mode(env: VectorEnv) -> None:
    """The loop reads `final_obs` on the step that ends an episode: only SAME_STEP provides that."""
    mode = env.metadata.get("autoreset_mode")
    if mode != AutoresetMode.SAME_STEP:
        raise ConfigError(
            f"vector env autoreset mode {mode!r} is not supported: the training loop is written for "
            f"{AutoresetMode.SAME_STEP!r} (final observation in info['final_obs'] on the ending step)"
        )


def env_spec(env: VectorEnv) -> EnvSpec:
    return EnvSpec(
        obs_dim=int(np.prod(env.single_observation_space.shape)),
        action_dim=int(np.prod(env.single_action_space.shape)),
    )


def step_vector_env(env: VectorEnv, actions: np.ndarray) -> tuple[Any, ...]:
    """`env.step` that turns a failed or dead subprocess worker into an EnvWorkerError naming it."""
    try:
        return env.step(actions)
    except Exception as error:
        if not isinstance(env, AsyncVectorEnv):
            raise
        failed = [i for i, pipe in enumerate(env.parent_pipes) if pipe is None]  # gymnasium's mark
        if isinstance(error, EOFError | ConnectionError):  # a worker's pipe closed: wait for its exit code
            for proc in env.processes:
                proc.join(timeout=1.0)
        dead = [i for i, proc in enumerate(env.processes) if proc.exitcode is not None]
        workers = sorted(set(failed) | set(dead))
        detail = ", ".join(
            f"worker {i}" + (f" exited with code {env.processes[i].exitcode}" if i in dead else " raised")
            for i in workers
        )
        raise EnvWorkerError(
            f"environment {detail or 'worker'} failed: {type(error).__name__}: {error} "
            "(the worker's traceback is printed above)"
        ) from error


def close_vector_env(env: VectorEnv, failed: bool) -> None:
    """Close; after a failure, terminate subprocess workers instead of waiting on a broken step."""
    if failed and isinstance(env, AsyncVectorEnv):
        # gymnasium's close first waits for the pending step, which re-raises the worker's failure
        # (EOFError from a dead one); nothing is pending any more once the step has failed.
        env._state = AsyncState.DEFAULT
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
