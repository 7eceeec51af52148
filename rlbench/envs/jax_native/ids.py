"""JAX-native env ids, `<prefix>:<the package's own env name>` (gymnax:Pendulum-v1, brax:halfcheetah,
playground:CheetahRun), and the one way to build their JaxEnv."""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import Any

from rlbench.envs.jax_native.env import JaxEnv
from rlbench.envs.jax_native.packages import JAX_ENV_PREFIXES, import_env_package, mujoco_warnings_caught
from rlbench.errors import ConfigError

__all__ = ["JAX_ENV_PREFIXES", "import_env_package", "is_jax_native", "make_jax_env", "register_jax_env"]

# One's own JAX-native envs, by id: what `register_jax_env` added in this process.
_REGISTERED: dict[str, Callable[[dict[str, Any]], JaxEnv]] = {}


def register_jax_env(env_id: str, make: Callable[[dict[str, Any]], JaxEnv]) -> None:
    """Add a JAX-native env of one's own under `env_id` ("package:Name-v0"), as gymnasium.register adds a
    gymnasium env: `make(env_kwargs)` builds its JaxEnv. Call it in a module that train.py imports with
    --gym-packages (it is imported before the env id is checked); the device loop then trains on it."""
    prefix, sep, name = env_id.partition(":")
    if not (sep and prefix and name) or prefix in JAX_ENV_PREFIXES:
        reserved = ", ".join(JAX_ENV_PREFIXES)
        raise ValueError(f"JAX env id {env_id!r}: expected <package>:<name>, with a prefix other than {reserved}")
    _REGISTERED[env_id] = make
    _cached_build.cache_clear()  # an id registered again builds the new env


def is_jax_native(env_id: str) -> bool:
    """Whether `env_id` names a JAX-native env: "gymnax:Pendulum-v1" and registered ids yes; "Pendulum-v1"
    and gymnasium's "my.module:Env-v0" (a module that registers gymnasium envs) no."""
    prefix, sep, _ = env_id.partition(":")
    return (bool(sep) and prefix in JAX_ENV_PREFIXES) or env_id in _REGISTERED


def make_jax_env(env_id: str, env_kwargs: Mapping[str, Any] | None = None) -> JaxEnv:
    """The JaxEnv of `env_id` built with `env_kwargs`; ConfigError (one line) for an id, package or kwarg
    that cannot make one. Built once per id and kwargs: jit caches key on the env's functions."""
    if not is_jax_native(env_id):
        raise ConfigError(
            f"environment {env_id!r} is not a JAX-native id; expected one of the prefixes "
            f"{', '.join(p + ':' for p in JAX_ENV_PREFIXES)}"
        )
    kwargs = dict(env_kwargs or {})
    try:
        frozen = _frozen(kwargs)
        hash(frozen)
    except TypeError:  # a value that has no hashable form: built every time
        return _build(env_id, kwargs)
    return _cached_build(env_id, frozen)


@functools.lru_cache(maxsize=64)
def _cached_build(env_id: str, frozen_kwargs: Frozen) -> JaxEnv:
    return _build(env_id, _thawed(frozen_kwargs))


def _build(env_id: str, kwargs: dict[str, Any]) -> JaxEnv:
    if env_id in _REGISTERED:
        return _REGISTERED[env_id](kwargs)
    prefix, _, name = env_id.partition(":")
    builder = _builders()[prefix]
    if prefix == "gymnax":  # no MuJoCo model
        return builder(env_id, name, kwargs)
    with mujoco_warnings_caught(env_id):
        return builder(env_id, name, kwargs)


def _builders() -> dict[str, Callable[[str, str, dict[str, Any]], JaxEnv]]:
    # Imported here: each builder imports its package only when an id of it is built.
    from rlbench.envs.jax_native import brax_envs, gymnax_envs, playground_envs

    return {
        "gymnax": gymnax_envs.make_gymnax_env,
        "brax": brax_envs.make_brax_env,
        "playground": playground_envs.make_playground_env,
    }


# A kwargs value in a hashable form, tagged with its kind: ("dict", ((key, Frozen), ...)), ("list" or "tuple",
# (Frozen, ...)) or ("value", the value itself).
Frozen = tuple[str, Any]


def _frozen(value: object) -> Frozen:
    """A hashable form of kwargs (dicts as sorted item tuples, lists as tuples), tagged so it thaws back."""
    if isinstance(value, Mapping):
        return ("dict", tuple(sorted((str(k), _frozen(v)) for k, v in value.items())))
    if isinstance(value, list | tuple):
        return (type(value).__name__, tuple(_frozen(v) for v in value))
    return ("value", value)


def _thawed(frozen: Frozen) -> Any:
    kind, content = frozen
    if kind == "dict":
        return {k: _thawed(v) for k, v in content}
    if kind in ("list", "tuple"):
        items = [_thawed(v) for v in content]
        return items if kind == "list" else tuple(items)
    return content
