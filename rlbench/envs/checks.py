"""What an env id and its kwargs are refused for before a run starts: an id no package knows (with close matches),
a package missing (its install command), kwargs the env rejects, found by building one env, resetting it and
taking one step. gymnasium, JAX-native and EnvPool ids alike."""

from __future__ import annotations

import difflib
from collections.abc import Mapping, Sequence
from typing import Any, cast

import gymnasium as gym
import numpy as np

from rlbench.envs import envpool_vector
from rlbench.envs.bounds import non_finite_kwarg, unrescalable_bounds
from rlbench.envs.discrete import index_space
from rlbench.envs.envpool_atari import pool_kwargs
from rlbench.envs.jax_native.gym_env import jax_env_spaces
from rlbench.envs.jax_native.ids import is_jax_native, make_jax_env
from rlbench.envs.jax_native.packages import shown_kwargs
from rlbench.envs.make import import_env_packages, make_single_env, original_spaces
from rlbench.envs.wrappers import EnvWrapper
from rlbench.errors import ConfigError


def check_env_id(env_id: str) -> None:
    """ConfigError with a did-you-mean suggestion when gymnasium, or for a JAX-native id its package, does not
    know `env_id` (and for a JAX-native id whose package is missing or whose env rlbench cannot train on)."""
    if envpool_vector.is_envpool(env_id):
        envpool_vector.check_task(env_id)
        return
    import_env_packages(env_id)  # `module:Name` imports module: it may register gymnasium or JAX-native envs
    if is_jax_native(env_id):
        make_jax_env(env_id)
        return
    if env_id.partition(":")[2] in gym.registry or env_id in gym.registry:
        return
    close = difflib.get_close_matches(env_id, list(gym.registry), n=3)
    hint = f"; did you mean {', '.join(close)}?" if close else ""
    raise ConfigError(f"environment {env_id!r} not found in the gymnasium registry{hint}")


# gymnasium env families whose package is one of rlbench's extras (gymnasium's own hint names its extras).
EXTRA_OF_PACKAGE = {"Box2D": "box2d", "pygame": "video"}


def missing_dependency(env_id: str, error: Exception) -> str:
    """One line: what `env_id` needs and the install command of the rlbench extra that brings it."""
    text = " ".join(str(error).split())
    for package, extra in EXTRA_OF_PACKAGE.items():
        if package.lower() in text.lower():
            return f'{env_id} needs {package}, which is not installed: pip install -e ".[{extra}]"'
    return f"{env_id} needs a package that is not installed: {text}"


def check_env_runs(
    env_id: str, env_kwargs: Mapping[str, Any], wrappers: Sequence[EnvWrapper], packages: Sequence[str], flag: str
) -> tuple[gym.spaces.Box, gym.spaces.Box]:
    """Build one env with `env_kwargs`, reset it and take one step, then close it: ConfigError (one line
    naming `flag`) when any of that fails, so that kwargs an env accepts but cannot use (a string where
    it computes with a number) are refused before training, not at the first step or evaluation.
    Returns the env's `original_spaces`."""
    if (non_finite := non_finite_kwarg(env_kwargs)) is not None:
        raise ConfigError(
            f"{flag}: {env_id}'s {non_finite} is not finite; env kwargs must be finite numbers "
            "(inf only inside a list or tuple, e.g. a range's open end)"
        )
    if envpool_vector.is_envpool(env_id):  # Atari's wrappers only, as the pool's own options
        envpool_vector.check_kwargs(env_id, env_kwargs, flag)
        return envpool_vector.pool_spaces(env_id, pool_kwargs(env_id, wrappers, env_kwargs), flag)
    if is_jax_native(env_id) and not wrappers:
        return _jax_env_spaces(env_id, env_kwargs, flag)
    env = None
    try:
        env = make_single_env(env_id, env_kwargs, wrappers, packages)
        spaces = original_spaces(env)
        env.reset(seed=0)
        env.step(np.zeros(env.action_space.shape, env.action_space.dtype))  # the middle of [-1, 1], or action 0
    except ConfigError:
        raise
    except gym.error.DependencyNotInstalled as error:  # the env's own package, not its kwargs
        raise ConfigError(missing_dependency(env_id, error)) from None
    except Exception as error:
        message = " ".join(str(error).split())  # one line
        raise ConfigError(
            f"{flag}: {env_id} fails with {shown_kwargs(env_kwargs)}: {type(error).__name__}: {message}"
        ) from None
    finally:
        if env is not None:
            env.close()
    return spaces


def _jax_env_spaces(env_id: str, env_kwargs: Mapping[str, Any], flag: str) -> tuple[gym.spaces.Box, gym.spaces.Box]:
    """check_env_runs for a JAX-native env: make_jax_env has traced its reset and step with the kwargs
    (jax.eval_shape), which refuses what building and stepping would, without compiling the env (tens of
    seconds for a physics env on a CPU)."""
    try:
        jax_env = make_jax_env(env_id, env_kwargs)
    except ConfigError as error:
        message = str(error)
        raise ConfigError(
            f"{flag}: {message.removeprefix('env_kwargs: ')}" if message.startswith("env_kwargs: ") else message
        ) from None
    if (unrescalable := unrescalable_bounds(jax_env.action_low, jax_env.action_high)) is not None:
        raise ConfigError(f"{flag}: {env_id} with {shown_kwargs(env_kwargs)}: {unrescalable}")
    observation_space, action_space = jax_env_spaces(jax_env)
    if jax_env.spec.discrete:  # as original_spaces gives a wrapped Discrete env's
        return observation_space, index_space(jax_env.spec.n_actions)
    return observation_space, cast(gym.spaces.Box, action_space)  # a Box: the env is not discrete
