"""Which env wrappers a hyperparameter entry may name, and how they are loaded.

RL Zoo's `env_wrapper` names a class by its dotted path, and the entry comes back from files that
anything could have written: a run's config.yml (enjoy.py), a checkpoint's manifest (`train.py -i`).
A name in such a file must never choose code to run, so a name is resolved only if all of these hold,
each checked before the next step:

1. it is a dotted path of identifiers (`module.Class`);
2. its module is on the allow-list: gymnasium's wrappers, rlbench's own, and the modules the user named
   on the command line (`--gym-packages`, `--trust-wrappers`). Nothing is imported before this check;
3. the name resolves to a class that subclasses `gymnasium.Wrapper` (not any callable: `os.system`
   is refused);
4. its keyword arguments are plain literals (numbers, strings, booleans, None, lists and dicts of them).

The checks apply to every source alike, the user's own -conf file included: one rule is easier to trust
than two, and a user's own wrapper module is one `--trust-wrappers MODULE` away.

A few names RL Zoo's files use stand for rlbench's own copy of the class (`STAND_INS`): the name is kept
as the file spells it, and the module it names is never imported (sb3_contrib and SB3 would import torch).
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import gymnasium as gym

from rlbench.errors import ConfigError

# Modules whose wrappers any file may name: gymnasium's and rlbench's own.
BUILTIN_WRAPPER_MODULES = ("gymnasium.wrappers", "rlbench.envs")
# Wrappers of packages rlbench does not install, by the name RL Zoo's files give them -> rlbench's copy.
STAND_INS = {
    "sb3_contrib.common.wrappers.TimeFeatureWrapper": "rlbench.envs.observations.TimeFeatureWrapper",
    "stable_baselines3.common.atari_wrappers.AtariWrapper": "rlbench.envs.atari.AtariWrapper",
}
_DOTTED_PATH = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)+")


@dataclass(frozen=True)
class EnvWrapper:
    """A checked wrapper: the name as the file spells it, the class it resolved to, and its kwargs.
    Picklable (the class by reference), so subprocess env workers receive it already checked."""

    name: str
    wrapper_class: type[gym.Wrapper]
    kwargs: Mapping[str, Any]

    def __call__(self, env: gym.Env) -> gym.Env:
        return self.wrapper_class(env, **dict(self.kwargs))

    def to_entry(self) -> dict[str, dict[str, Any]]:
        """RL Zoo's format, as config.yml stores it."""
        return {self.name: dict(self.kwargs)}


def trusted_modules(user_modules: Iterable[str] = ()) -> tuple[str, ...]:
    """The allow-list: the built-in modules and those the user named on the command line."""
    return (*BUILTIN_WRAPPER_MODULES, *user_modules)


def _is_trusted(module: str, trusted: Iterable[str]) -> bool:
    # A module or its submodules: "gymnasium.wrappers" trusts "gymnasium.wrappers.common", not "gymnasium.wrappersx".
    return any(module == root or module.startswith(root + ".") for root in trusted)


def parse_env_wrappers(value: object, trusted: Iterable[str]) -> tuple[EnvWrapper, ...]:
    """RL Zoo's env_wrapper: a dotted class name, a {name: kwargs} dict, or a list of either; each one
    checked as the module docstring says. ConfigError names the entry and what would be valid."""
    if value in (None, [], {}):
        return ()
    trusted = tuple(trusted)
    items = value if isinstance(value, list | tuple) else [value]
    wrappers = []
    for item in items:
        kwargs: object
        if isinstance(item, str):
            name, kwargs = item, {}
        elif isinstance(item, Mapping) and len(item) == 1:
            ((name, kwargs),) = item.items()
            if kwargs is None:
                kwargs = {}
            if not isinstance(kwargs, Mapping):
                raise ConfigError(f"env_wrapper {name!r}: kwargs must be a dict, got {kwargs!r}")
        else:
            raise ConfigError(f"env_wrapper: expected 'module.Class' or {{'module.Class': {{kwargs}}}}, got {item!r}")
        wrappers.append(EnvWrapper(name, load_wrapper_class(name, trusted), _literal_kwargs(name, kwargs)))
    return tuple(wrappers)


def load_wrapper_class(name: object, trusted: Iterable[str]) -> type[gym.Wrapper]:
    """The gymnasium.Wrapper subclass `name` names (or its stand-in), imported only once its module is trusted."""
    if not isinstance(name, str) or not _DOTTED_PATH.fullmatch(name):
        raise ConfigError(f"env_wrapper: {name!r} is not a dotted class name such as gymnasium.wrappers.TimeLimit")
    module_name, _, class_name = STAND_INS.get(name, name).rpartition(".")
    trusted = tuple(trusted)
    if not _is_trusted(module_name, trusted):
        raise ConfigError(
            f"env_wrapper {name!r}: module {module_name!r} is not trusted (trusted: {', '.join(trusted)}); "
            f"if it is your own, pass --trust-wrappers {module_name.split('.')[0]}"
        )
    try:
        wrapper_class = getattr(importlib.import_module(module_name), class_name)
    except (ImportError, AttributeError) as error:
        raise ConfigError(f"env_wrapper: cannot import {name!r} ({error})") from None
    if not (isinstance(wrapper_class, type) and issubclass(wrapper_class, gym.Wrapper)):
        raise ConfigError(
            f"env_wrapper {name!r}: not a gymnasium.Wrapper subclass (got {type(wrapper_class).__name__})"
        )
    return wrapper_class


def _literal_kwargs(name: str, kwargs: Mapping[Any, Any]) -> dict[str, Any]:
    def check(value: object, where: str) -> None:
        if value is None or isinstance(value, bool | int | float | str):
            return
        if isinstance(value, list | tuple):
            for i, item in enumerate(value):
                check(item, f"{where}[{i}]")
            return
        if isinstance(value, Mapping):
            for key, item in value.items():
                if not isinstance(key, str):
                    raise ConfigError(f"env_wrapper {name!r}: {where} has a non-string key {key!r}")
                check(item, f"{where}.{key}")
            return
        raise ConfigError(
            f"env_wrapper {name!r}: {where} must be a literal (number, string, bool, None, list or "
            f"dict), got {type(value).__name__}"
        )

    for key, value in kwargs.items():
        if not isinstance(key, str) or not key.isidentifier():
            raise ConfigError(f"env_wrapper {name!r}: keyword {key!r} is not a valid argument name")
        check(value, key)
    return dict(kwargs)
