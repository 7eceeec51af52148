"""JAX-native env ids, `<prefix>:<the package's own env name>` (gymnax:Pendulum-v1, brax:halfcheetah,
playground:CheetahRun), and the one way to build their JaxEnv."""

from __future__ import annotations

import difflib
import functools
import importlib
from collections.abc import Callable, Mapping, Sequence
from types import ModuleType
from typing import Any

from rlbench.envs.jax_native.env import JaxEnv
from rlbench.errors import ConfigError

EXTRA = "jax-envs"
# prefix -> (the Python package to import, the rlbench extra that installs it)
JAX_ENV_PREFIXES: dict[str, tuple[str, str]] = {
    "gymnax": ("gymnax", EXTRA),
    "brax": ("brax", EXTRA),
    "playground": ("mujoco_playground", EXTRA),
}


def is_jax_native(env_id: str) -> bool:
    """ "gymnax:Pendulum-v1" -> True; "Pendulum-v1" and gymnasium's "my.module:Env-v0" -> False."""
    prefix, sep, _ = env_id.partition(":")
    return bool(sep) and prefix in JAX_ENV_PREFIXES


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


def import_env_package(env_id: str, package: str, extra: str) -> ModuleType:
    """`package`, or a ConfigError naming it and the rlbench extra that installs it."""
    try:
        return importlib.import_module(package)
    except ImportError as error:
        raise ConfigError(
            f"environment {env_id!r} needs the package {package!r}, which cannot be imported ({error}): "
            f'pip install -e ".[{extra}]"'
        ) from None


def unknown_env_error(env_id: str, known: Sequence[str], suggested: Sequence[str]) -> ConfigError:
    """ConfigError for a name the package does not have: its close matches, else the names rlbench runs."""
    prefix, _, name = env_id.partition(":")
    close = difflib.get_close_matches(name, list(known), n=3, cutoff=0.5)
    shown = close or list(suggested)
    hint = "did you mean" if close else "rlbench runs"
    return ConfigError(
        f"environment {env_id!r}: {prefix} has no environment {name!r}; {hint} "
        + ", ".join(f"{prefix}:{candidate}" for candidate in shown)
    )


@functools.lru_cache(maxsize=64)
def _cached_build(env_id: str, frozen_kwargs: tuple) -> JaxEnv:
    return _build(env_id, _thawed(frozen_kwargs))


def _build(env_id: str, kwargs: dict[str, Any]) -> JaxEnv:
    prefix, _, name = env_id.partition(":")
    return _builders()[prefix](env_id, name, kwargs)


def _builders() -> dict[str, Callable[[str, str, dict[str, Any]], JaxEnv]]:
    # Imported here: each builder imports its package only when an id of it is built.
    from rlbench.envs.jax_native import gymnax_envs

    return {"gymnax": gymnax_envs.make_gymnax_env}


def _frozen(value: Any) -> Any:
    """A hashable form of kwargs (dicts as sorted item tuples, lists as tuples), tagged so it thaws back."""
    if isinstance(value, Mapping):
        return ("dict", tuple(sorted((str(k), _frozen(v)) for k, v in value.items())))
    if isinstance(value, list | tuple):
        return (type(value).__name__, tuple(_frozen(v) for v in value))
    return ("value", value)


def _thawed(frozen: Any) -> Any:
    kind, content = frozen
    if kind == "dict":
        return {k: _thawed(v) for k, v in content}
    if kind in ("list", "tuple"):
        items = [_thawed(v) for v in content]
        return items if kind == "list" else tuple(items)
    return content
