"""JAX's persistent compilation cache, on by default: a process that compiled an update once saves it,
and every later train.py, enjoy.py, tuning trial or sweep run with the same shapes loads it instead of
compiling again (seconds per process on a CPU, more on a GPU).

- Where: `--compile-cache DIR` > `RLBENCH_COMPILE_CACHE` > `$XDG_CACHE_HOME/rlbench/jax` (`~/.cache/...`).
  `none` (flag or variable) turns it off. The choice is exported in the environment, as JAX's own
  variables too, so processes this one starts (tuning workers, benchmark rows) use the same cache.
- What: every compilation is cached (JAX's defaults skip those under 1 s, which is most of rlbench's
  on a GPU), bounded to `MAX_BYTES` with least-recently-used eviction.
- Safe to share between processes: with eviction on, JAX takes a file lock around every read and write,
  so two runs compiling the same update at once never read each other's half-written entry. An entry
  that cannot be read (torn by a killed process, another version's) is reported by JAX as a warning and
  compiled again: never fatal.
- Trusted: a cache entry is machine code that this process will run. JAX's documentation warns that
  anyone who can write to the cache can run code as its user, so a cache folder that others can write
  to is refused.
- Deterministic: a loaded executable is the one the same compilation produced, so results are bit for
  bit those of a cold run (tested).
"""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path

import jax

from rlbench.errors import ConfigError

ENV_VAR = "RLBENCH_COMPILE_CACHE"
OFF = "none"
MAX_BYTES = 2 * 2**30  # LRU-evicted beyond this; also what turns on JAX's file lock


def default_cache_dir() -> Path:
    cache_home = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache_home) / "rlbench" / "jax"


def resolve_cache_dir(flag: str | None) -> Path | None:
    """The folder to use: the flag, else the environment variable, else the per-user default; None if off."""
    choice = flag if flag is not None else os.environ.get(ENV_VAR)
    if choice is not None and choice.strip().lower() == OFF:
        return None
    return Path(choice).expanduser() if choice else default_cache_dir()


def _check_private(folder: Path, where: str) -> None:
    """The folder must be ours and writable by nobody else: its entries are code this process runs."""
    info = folder.stat()
    if not stat.S_ISDIR(info.st_mode):
        raise ConfigError(f"{where} {folder}: not a folder")
    if info.st_uid != os.getuid() or info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise ConfigError(
            f"{where} {folder}: other users can write to it, and a compilation cache holds code this "
            f"process runs; use a private folder (chmod go-w) or --compile-cache {OFF}"
        )


def enable(flag: str | None = None) -> Path | None:
    """Turn the cache on (before the first compilation) and return its folder, or None when it is off.

    ConfigError (exit 2) for an explicitly chosen folder that cannot be created or is not private; the
    default folder in that state only turns the cache off, with a warning (a run must not fail for it).
    """
    explicit = "--compile-cache" if flag is not None else (ENV_VAR if os.environ.get(ENV_VAR) else None)
    folder = resolve_cache_dir(flag)
    if folder is not None:
        try:
            folder.mkdir(parents=True, exist_ok=True, mode=0o700)
            _check_private(folder, explicit or "compilation cache")
        except (OSError, ConfigError) as error:
            message = str(error) if isinstance(error, ConfigError) else f"{folder}: {error.strerror or error}"
            if explicit:
                raise ConfigError(message if isinstance(error, ConfigError) else f"{explicit} {message}") from None
            print(f"Warning: compilation cache off ({message})", file=sys.stderr)
            folder = None
    os.environ[ENV_VAR] = str(folder) if folder is not None else OFF
    settings = _jax_settings(folder)
    for name, value in settings.items():
        jax.config.update(name, value)
        # JAX reads each setting's upper-case name from the environment when it is imported: processes
        # this one starts (tuning workers, benchmark rows) use the same cache without code of their own.
        if value is None:
            os.environ.pop(name.upper(), None)
        else:
            os.environ[name.upper()] = str(value)
    return folder


def _jax_settings(folder: Path | None) -> dict[str, object]:
    if folder is None:
        return {"jax_compilation_cache_dir": None}
    return {
        "jax_compilation_cache_dir": str(folder),
        "jax_persistent_cache_min_compile_time_secs": 0.0,
        "jax_persistent_cache_min_entry_size_bytes": -1,
        "jax_compilation_cache_max_size": MAX_BYTES,
    }


def describe(folder: Path | None) -> str:
    """The startup line."""
    if folder is None:
        return "Compilation cache: off"
    return f"Compilation cache: {folder} (--compile-cache {OFF} turns it off)"
