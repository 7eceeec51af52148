"""Brax's envs as JaxEnvs (`brax:halfcheetah`). Env kwargs are the env class's constructor arguments, the
physics `backend` among them (default: the env's own), and rlbench's `episode_length` (the time limit,
default 1000 as Brax's trainers)."""

from __future__ import annotations

import inspect
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
from rlbench.envs.jax_native.state_envs import StateProtocolEnv, state_protocol_env
from rlbench.errors import ConfigError
from rlbench.types import PyTree

EPISODE_LENGTH = 1000  # Brax's trainers' episode_length
BACKENDS = ("generalized", "positional", "spring", "mjx")
PIPELINE_KWARGS = ("backend", "n_frames", "debug")  # PipelineEnv's, which every physics env passes on


def make_brax_env(env_id: str, name: str, env_kwargs: dict[str, Any]) -> JaxEnv:
    import_env_package(env_id, *JAX_ENV_PREFIXES["brax"])
    from brax import envs

    registry = envs._envs  # Brax's registry: get_environment's KeyError names nothing
    if name not in registry:
        raise unknown_env_error(env_id, sorted(registry), ["ant", "halfcheetah", "hopper", "humanoid", "walker2d"])
    kwargs = dict(env_kwargs)
    episode_length = positive_int(env_id, "episode_length", kwargs.pop("episode_length", EPISODE_LENGTH))
    _check_kwargs(env_id, registry[name], kwargs)
    try:
        env = envs.get_environment(name, **kwargs)
    except Exception as error:
        raise kwargs_error(env_id, env_kwargs, error) from None
    return state_protocol_env(env_id, env, episode_length, env_kwargs, _renderer(env))


def _check_kwargs(env_id: str, env_class: type[Any], kwargs: dict[str, Any]) -> None:
    parameters = inspect.signature(env_class.__init__).parameters
    valid = [p for p, spec in parameters.items() if p != "self" and spec.kind is not spec.VAR_KEYWORD]
    if any(spec.kind is spec.VAR_KEYWORD for spec in parameters.values()):
        valid += [p for p in PIPELINE_KWARGS if p not in valid]
    for key in kwargs:
        if key not in valid:
            raise unknown_kwarg_error(env_id, key, [*valid, "episode_length"])
    backend = kwargs.get("backend")
    if backend is not None and backend not in BACKENDS:
        raise ConfigError(f"env_kwargs: {env_id}'s backend {backend!r} is not one of {', '.join(BACKENDS)}")


def _renderer(env: StateProtocolEnv) -> Render | None:
    """Frames through MuJoCo's renderer (brax.io.image), for the physics envs (those with a System)."""
    system = getattr(env, "sys", None)
    if system is None or getattr(system, "mj_model", None) is None:
        return None

    # The model's first camera (Brax's locomotion models: "track", which follows the body), else MuJoCo's
    # free camera, from where a cheetah is a few pixels.
    camera = (system.mj_model.camera(0).name or 0) if system.mj_model.ncam else None

    def render(state: PyTree) -> npt.NDArray[np.uint8]:
        from brax.io import image

        return np.asarray(image.render_array(system, state.pipeline_state, height=240, width=320, camera=camera))

    return render
