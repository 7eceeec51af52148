"""The packages JAX-native envs come from, and the errors every builder words the same way."""

from __future__ import annotations

import contextlib
import difflib
import importlib
import reprlib
import warnings
from collections.abc import Iterator, Mapping, Sequence
from types import ModuleType
from typing import Any

from rlbench.errors import ConfigError

# prefix -> (the Python package to import, the rlbench extra that installs it: one per package, so that a
# gymnax user does not install Playground's NVIDIA Warp; `jax-envs` installs all three)
JAX_ENV_PREFIXES: dict[str, tuple[str, str]] = {
    "gymnax": ("gymnax", "gymnax"),
    "brax": ("brax", "brax"),
    "playground": ("mujoco_playground", "playground"),  # on PyPI as "playground"
}


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


def unknown_kwarg_error(env_id: str, key: str, valid: Sequence[str]) -> ConfigError:
    return ConfigError(f"env_kwargs: {env_id} has no parameter {key!r}; valid: {', '.join(valid)}")


def shown_kwargs(env_kwargs: Mapping[str, Any]) -> str:
    """`k=v, ...` with each value bounded (reprlib: a YAML alias can make a small file a huge value)."""
    return ", ".join(f"{k}={reprlib.repr(v)}" for k, v in env_kwargs.items()) or "no kwargs"


def kwargs_error(env_id: str, env_kwargs: Mapping[str, Any], error: Exception) -> ConfigError:
    """ConfigError for kwargs the env accepted but cannot build or trace with (one line, values bounded)."""
    message = " ".join(str(error).split())
    if not env_kwargs:
        return ConfigError(f"environment {env_id!r} fails to build: {type(error).__name__}: {message}")
    return ConfigError(f"env_kwargs: {env_id} fails with {shown_kwargs(env_kwargs)}: {type(error).__name__}: {message}")


def positive_int(env_id: str, key: str, value: object) -> int:
    """An episode length from env_kwargs, checked."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(f"env_kwargs: {env_id}'s {key} must be a positive integer, got {reprlib.repr(value)}")
    return value


@contextlib.contextmanager
def mujoco_warnings_caught(env_id: str) -> Iterator[None]:
    """MuJoCo's own warnings while an env's model compiles (Brax's and Playground's XML use attributes
    MuJoCo 4 deprecates), as Python warnings: MuJoCo's default handler prints them on stdout, in the middle
    of a run's output, and appends them to MUJOCO_LOG.TXT in the working directory."""
    import mujoco

    caught: list[str] = []
    previous = mujoco.get_mju_user_warning()
    mujoco.set_mju_user_warning(caught.append)
    try:
        yield
    finally:
        mujoco.set_mju_user_warning(previous)
        for text in dict.fromkeys(caught):
            warnings.warn(f"{env_id}: MuJoCo: {text}", stacklevel=3)
