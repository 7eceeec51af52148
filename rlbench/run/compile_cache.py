"""JAX's persistent compilation cache, on by default: a process that compiled an update once saves it,
and every later train.py, enjoy.py, tuning trial or sweep run with the same shapes loads it instead of
compiling again (seconds per process on a CPU, more on a GPU).

- Where: `--compile-cache DIR` > `RLBENCH_COMPILE_CACHE` > `$XDG_CACHE_HOME/rlbench/jax` (`~/.cache/...`).
  `none` (flag or variable) turns it off. The choice is exported in the environment, as JAX's own
  variables too, so processes this one starts (tuning workers, benchmark rows) use the same cache.
- What: every compilation is cached (JAX's defaults skip those under 1 s, which is most of rlbench's
  on a GPU), bounded to `MAX_BYTES` with least-recently-used eviction, or to JAX's own
  `JAX_COMPILATION_CACHE_MAX_SIZE` where it is set (bytes; -1: no bound, hence no eviction and no lock).
  JAX's eviction lists and stats every entry before each write (benchmarks/README.md, issue 47), so a
  folder that is thrown away after use (the test session's) is best left unbounded.
- Safe to share between processes: with eviction on, JAX takes a file lock around every read and write,
  so two runs compiling the same update at once never read each other's half-written entry. An entry
  that cannot be read (torn by a killed process, another version's) is reported by JAX as a warning and
  compiled again: never fatal.
- Trusted: a cache entry is machine code that this process will run. JAX's documentation warns that
  anyone who can write to the cache can run code as its user, so the folder must be the user's own and
  writable by nobody else, and so must the way to it: every folder above it, as ssh's StrictModes
  checks a key file's, must belong to the user or root and be writable by nobody else, or be sticky
  (as /tmp: others may add entries there, but not rename or remove the user's). Otherwise someone could
  rename the cache folder away and put theirs in its place. The folder is opened from `/` down, one
  component at a time without following links, each checked as it is opened (a missing one is created,
  private), and held open for the process's life: on Linux JAX is given `/proc/self/fd/<N>`, so every
  entry it reads or writes is in the folder that was checked, whatever is renamed around it later.
  Processes this one starts check the folder again in their own `enable` (they get its real path).
- Deterministic: a loaded executable is the one the same compilation produced, so results are bit for
  bit those of a cold run (tested).
"""

from __future__ import annotations

import contextlib
import os
import stat
import sys
from pathlib import Path

import jax

from rlbench.errors import ConfigError

ENV_VAR = "RLBENCH_COMPILE_CACHE"
OFF = "none"
MAX_BYTES = 2 * 2**30  # LRU-evicted beyond this; also what turns on JAX's file lock
MAX_SIZE_VAR = "JAX_COMPILATION_CACHE_MAX_SIZE"  # JAX's own variable: a bound set there wins over MAX_BYTES


def default_cache_dir() -> Path:
    cache_home = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache_home) / "rlbench" / "jax"


def resolve_cache_dir(flag: str | None) -> Path | None:
    """The folder to use: the flag, else the environment variable, else the per-user default; None if off."""
    choice = flag if flag is not None else os.environ.get(ENV_VAR)
    if choice is not None and choice.strip().lower() == OFF:
        return None
    return Path(choice).expanduser() if choice else default_cache_dir()


_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW
_held: dict[tuple[int, int], int] = {}  # (st_dev, st_ino) -> an open descriptor, never closed: JAX may use its path


def _refuse(where: str, folder: Path, problem: str) -> ConfigError:
    return ConfigError(
        f"{where} {folder}: {problem}, and a compilation cache holds code this process runs; use a folder "
        f"that only you can write to, under folders only you or root can write to (or sticky ones, as /tmp), "
        f"or --compile-cache {OFF}"
    )


def _check_folder(info: os.stat_result, path: Path, folder: Path, where: str) -> None:
    """The rule for the cache folder itself (`path == folder`) or one of the folders above it."""
    writable_by_others = info.st_mode & (stat.S_IWGRP | stat.S_IWOTH)
    mode = oct(stat.S_IMODE(info.st_mode))
    if path == folder:
        if info.st_uid != os.getuid() or writable_by_others:
            raise _refuse(where, folder, f"other users can write to it (owner uid {info.st_uid}, mode {mode})")
    elif info.st_uid not in (0, os.getuid()):
        raise _refuse(where, folder, f"the folder above it {path} belongs to another user (uid {info.st_uid})")
    elif writable_by_others and not info.st_mode & stat.S_ISVTX:
        raise _refuse(
            where, folder, f"the folder above it {path} can be written by other users (mode {mode}, not sticky)"
        )


def open_private_folder(folder: Path, where: str) -> tuple[Path, int]:
    """(the folder's real path, an open descriptor of it): opened from `/` down without following links, each
    component checked as it is opened, missing ones created (mode 0700) under checked ones. ConfigError for
    a folder or a parent others could write to; OSError (ELOOP: a link that appeared since the path was
    resolved) passes through."""
    real = Path(os.path.realpath(folder))
    fd = os.open("/", _DIR_FLAGS)
    try:
        path = Path("/")
        _check_folder(os.fstat(fd), path, real, where)
        for name in real.parts[1:]:
            path = path / name
            try:
                child = os.open(name, _DIR_FLAGS, dir_fd=fd)
            except FileNotFoundError:
                with contextlib.suppress(FileExistsError):  # created meanwhile: opened and checked as any other
                    os.mkdir(name, 0o700, dir_fd=fd)
                child = os.open(name, _DIR_FLAGS, dir_fd=fd)
            os.close(fd)
            fd = child
            _check_folder(os.fstat(fd), path, real, where)
    except BaseException:
        os.close(fd)
        raise
    return real, fd


def _pinned_path(real: Path, fd: int) -> str:
    """The path JAX uses for the folder `fd` holds: `/proc/self/fd/<fd>` where the system has it (the checked
    folder itself, whatever happens to its name), else its real path, checked once."""
    info = os.fstat(fd)
    key = (info.st_dev, info.st_ino)
    if key in _held:  # enabled again (tests, a long-lived process): keep the descriptor JAX may be using
        os.close(fd)
        fd = _held[key]
    else:
        _held[key] = fd
    pinned = f"/proc/self/fd/{fd}"
    try:
        return pinned if os.path.samestat(os.stat(pinned), info) else str(real)
    except OSError:
        return str(real)


def enable(flag: str | None = None) -> Path | None:
    """Turn the cache on (before the first compilation) and return its folder, or None when it is off.

    ConfigError (exit 2) for an explicitly chosen folder that cannot be created or is not private; the
    default folder in that state only turns the cache off, with a warning (a run must not fail for it).
    """
    explicit = "--compile-cache" if flag is not None else (ENV_VAR if os.environ.get(ENV_VAR) else None)
    folder = resolve_cache_dir(flag)
    jax_path = None
    if folder is not None:
        try:
            folder, fd = open_private_folder(folder, explicit or "compilation cache")
            jax_path = _pinned_path(folder, fd)
        except (OSError, ConfigError) as error:
            message = str(error) if isinstance(error, ConfigError) else f"{folder}: {error.strerror or error}"
            if explicit:
                raise ConfigError(message if isinstance(error, ConfigError) else f"{explicit} {message}") from None
            print(f"Warning: compilation cache off ({message})", file=sys.stderr)
            folder = None
    os.environ[ENV_VAR] = str(folder) if folder is not None else OFF
    for name, value in _jax_settings(folder).items():
        jax.config.update(name, jax_path if name == "jax_compilation_cache_dir" and value is not None else value)
        # JAX reads each setting's upper-case name from the environment when it is imported: processes
        # this one starts (tuning workers, benchmark rows) use the same cache without code of their own.
        # They get the real path (a /proc/self/fd path is this process's own).
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
        "jax_compilation_cache_max_size": max_size(),
    }


def max_size() -> int:
    """The cache's bound in bytes: JAX_COMPILATION_CACHE_MAX_SIZE where it is set (JAX read it at import, so
    it is an integer), else MAX_BYTES."""
    return int(os.environ.get(MAX_SIZE_VAR, MAX_BYTES))


def describe(folder: Path | None) -> str:
    """The startup line."""
    if folder is None:
        return "Compilation cache: off"
    return f"Compilation cache: {folder} (--compile-cache {OFF} turns it off)"
