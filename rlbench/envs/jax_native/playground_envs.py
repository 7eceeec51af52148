"""MuJoCo Playground's envs as JaxEnvs (`playground:CheetahRun`; the package is "playground" on PyPI,
imported as mujoco_playground). Env kwargs override the env's config (registry.get_default_config: ctrl_dt,
episode_length, ...); `episode_length` is the time limit. `impl` defaults to "jax" (MJX in JAX, which vmaps
over envs and seeds) where Playground's default is MuJoCo Warp."""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from rlbench.envs.jax_native.env import JaxEnv, Render
from rlbench.envs.jax_native.packages import (
    JAX_ENV_PREFIXES,
    import_env_package,
    kwargs_error,
    positive_int,
    unknown_env_error,
    unknown_kwarg_error,
)
from rlbench.envs.jax_native.state_envs import state_protocol_env
from rlbench.types import PyTree

EPISODE_LENGTH = 1000  # where an env's config has none


def make_playground_env(env_id: str, name: str, env_kwargs: dict[str, Any]) -> JaxEnv:
    import_env_package(env_id, *JAX_ENV_PREFIXES["playground"])
    from mujoco_playground import registry

    if name not in registry.ALL_ENVS:
        raise unknown_env_error(env_id, registry.ALL_ENVS, registry.dm_control_suite.ALL_ENVS)
    config = registry.get_default_config(name)
    valid = sorted(config.keys())
    for key in env_kwargs:
        if key not in valid:
            raise unknown_kwarg_error(env_id, key, valid)
    overrides = {**({"impl": "jax"} if "impl" in valid else {}), **env_kwargs}
    episode_length = positive_int(env_id, "episode_length", overrides.get("episode_length", _default_length(config)))
    try:
        env = registry.load(name, config_overrides=overrides)
    except Exception as error:  # a value the config refuses, or an env whose assets are missing
        raise kwargs_error(env_id, env_kwargs, error) from None
    return state_protocol_env(env_id, env, episode_length, env_kwargs, _renderer(env))


def _default_length(config: Any) -> int:  # an ml_collections ConfigDict (keys read as attributes)
    return int(config.episode_length) if "episode_length" in config else EPISODE_LENGTH


def _renderer(env: Any) -> Render:  # a Playground MjxEnv
    def render(state: PyTree) -> npt.NDArray[np.uint8]:
        return np.asarray(env.render([state], height=240, width=320)[0])

    return render
