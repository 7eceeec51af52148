"""Hyperparameter files (RL Zoo format): read safely, pick the env's entry, merge overrides.

Files are YAML (`yaml.safe_load`: anchors and merge keys work, Python tags are refused) or a Python
file / module defining a `hyperparams` dict (the user's own code, run as such). Entries are keyed by
env id, with `default` as the fallback.

Merge order, lowest first: algorithm defaults < algorithm preset (DroQ) < file entry < `-params`.
"""

from __future__ import annotations

import importlib
import runpy
import traceback
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from rlbench.envs.atari import is_atari
from rlbench.envs.envpool_vector import task_id
from rlbench.errors import ConfigError
from rlbench.files import UntrustedFileError, parse_yaml, read_bounded_text

MAX_KEYS_SHOWN = 100  # RL Zoo's largest file has ~60 entries
HYPERPARAMS_DIR = Path(__file__).resolve().parents[2] / "hyperparams"  # the repository's hyperparams/


def default_file(algo: str) -> Path:
    return HYPERPARAMS_DIR / f"{algo}.yml"


def read_file(conf: str | Path) -> dict[str, Any]:
    """The whole table {env_id: entry} of a hyperparameter file or module."""
    path = Path(conf)
    if path.suffix in (".yml", ".yaml"):
        if not path.is_file():
            raise ConfigError(f"hyperparameter file not found: {path}")
        try:  # bounded: a settings file is at most MAX_SETTINGS_BYTES, nested and alias-expanded within bounds
            table = parse_yaml(read_bounded_text(path))
        except UntrustedFileError as error:
            raise ConfigError(f"cannot read hyperparameters from {path}: {error}") from None
        except OSError as error:
            raise ConfigError(f"cannot read hyperparameters from {path}: {error.strerror or error}") from None
    elif path.suffix == ".py":
        if not path.is_file():
            raise ConfigError(f"hyperparameter file not found: {path}")
        table = _run_python_config(path)
    else:
        try:
            table = getattr(importlib.import_module(str(conf)), "hyperparams", None)
        except ImportError as error:
            raise ConfigError(
                f"cannot read hyperparameters from {conf!r}: not a .yml/.yaml/.py file and not an "
                f"importable module ({error})"
            ) from None
    if not isinstance(table, Mapping):
        raise ConfigError(f"{conf}: expected a mapping of env ids to hyperparameters")
    return dict(table)


def _run_python_config(path: Path) -> Any:
    """The `hyperparams` of a .py config (the user's own code, run as such); its errors become one line
    naming the file and line instead of a traceback."""
    try:
        return runpy.run_path(str(path)).get("hyperparams")
    except SyntaxError as error:
        raise ConfigError(f"{path}:{error.lineno}: syntax error in the hyperparameter file: {error.msg}") from None
    except Exception as error:
        frames = [f for f in traceback.extract_tb(error.__traceback__) if Path(f.filename) == path]
        where = f"{path}:{frames[-1].lineno}" if frames else str(path)
        raise ConfigError(f"{where}: the hyperparameter file raised {type(error).__name__}: {error}") from None


def select_entry(table: Mapping[str, Any], env_id: str, source: str, verbose: int = 1) -> dict[str, Any]:
    """The entry for `env_id`, else (for EnvPool's `envpool:X`) gymnasium's X, else `atari` for an Atari game, else
    `default`, else a ConfigError naming the keys the file has."""
    key, note = entry_key(table, env_id)
    if key is None:
        names = sorted(map(str, table))
        keys = ", ".join(names[:MAX_KEYS_SHOWN]) or "(none)"  # a file may hold 100,000 keys: one short line
        if len(names) > MAX_KEYS_SHOWN:
            keys += f" and {len(names) - MAX_KEYS_SHOWN} more"
        raise ConfigError(f"no hyperparameters for {env_id} in {source}, and no 'default' entry; keys: {keys}")
    if note is not None and verbose:
        print(f"Using {note} of {source} for {env_id}")
    entry = table[key]
    if entry is None:
        return {}
    if not isinstance(entry, Mapping):
        raise ConfigError(f"{source}: entry {env_id!r} must be a mapping, got {type(entry).__name__}")
    return dict(entry)


def entry_key(table: Mapping[str, Any], env_id: str) -> tuple[str | None, str | None]:
    """(the key of the entry `env_id` reads, or None; what to say when it is not the env's own)."""
    gymnasium_id = task_id(env_id)  # env_id itself unless an EnvPool id
    if env_id in table:
        return env_id, None
    if gymnasium_id in table:  # EnvPool's X is gymnasium's X, checked to match (benchmarks/README.md)
        return gymnasium_id, f"the {gymnasium_id} entry"
    if "atari" in table and is_atari(gymnasium_id):  # RL Zoo's rule: one entry for every Atari game
        return "atari", "the 'atari' entry"
    if "default" in table:
        return "default", "'default' hyperparameters"
    return None, None


def merge(*layers: Mapping[str, Any]) -> dict[str, Any]:
    """Later layers win. `policy_kwargs` dicts merge key by key, so `-params policy_kwargs:dict(...)`
    or a file entry changes only the keys it names (a preset's dropout survives a new net_arch)."""
    merged: dict[str, Any] = {}
    for layer in layers:
        for key, value in layer.items():
            if key == "policy_kwargs" and isinstance(value, Mapping) and isinstance(merged.get(key), Mapping):
                merged[key] = {**merged[key], **value}
            else:
                merged[key] = value
    return merged
