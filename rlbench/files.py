"""Files: crash-safe writing (a file appears under its final name complete, or not at all) and bounded reading
of files anything could have written (a parse failure of any kind is one UntrustedFileError)."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO

import yaml

TEMP_SUFFIX = ".tmp"
# atomic_writer's temporary files: mkstemp's `.<final name>.` prefix, 8 random characters, the suffix.
TEMP_NAME = re.compile(r"\.(.+)\.[a-z0-9_]{8}\.tmp")


def _file_mode() -> int:
    """0o666 less the umask: mkstemp's files are private (0o600), the files they become should not be."""
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask


FILE_MODE = _file_mode()


@contextlib.contextmanager
def atomic_writer(path: Path) -> Iterator[BinaryIO]:
    """A binary file to write `path` through: a temporary file in the same folder that is fsynced and
    renamed over `path` when the block ends, then the folder is fsynced. If the block raises, the
    temporary file is removed and `path` is untouched; if the process dies, a `.<name>.*.tmp` file
    remains, which `remove_stale_temporaries` cleans up. An OSError (a full disk, a quota) names `path`."""
    path = Path(path)
    fd, tmp = _locked_temporary(path)
    try:
        os.fchmod(fd, FILE_MODE)
        with os.fdopen(fd, "wb") as file:
            yield file
            file.flush()
            os.fsync(file.fileno())
            os.replace(tmp, path)  # still open, so still locked: no cleaner removes it before it has its name
    except BaseException as error:
        Path(tmp).unlink(missing_ok=True)
        if isinstance(error, OSError) and str(path) not in str(error):
            raise _naming(error, path) from error
        raise
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def _locked_temporary(path: Path) -> tuple[int, str]:
    """A new `.<name>.XXXXXXXX.tmp` beside `path`, locked (flock) until its descriptor closes, so that
    `remove_stale_temporaries` in any process leaves it alone while its writer lives. A cleaner that locked it
    between its creation and this lock has removed it: then another is made."""
    while True:
        try:
            fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=TEMP_SUFFIX)
        except OSError as error:
            raise _naming(error, path) from None
        with contextlib.suppress(OSError):  # a file system without locks: no cleaner can lock it either
            fcntl.flock(fd, fcntl.LOCK_EX)
        if _still_named(fd, tmp):
            return fd, tmp
        os.close(fd)


def _still_named(fd: int, name: str | Path) -> bool:
    try:
        named, held = os.stat(name, follow_symlinks=False), os.fstat(fd)
    except FileNotFoundError:
        return False
    return (named.st_dev, named.st_ino) == (held.st_dev, held.st_ino)


def _naming(error: OSError, path: Path) -> OSError:
    """`error` naming `path`; itself when it does already (a write inside `naming`, through atomic_writer):
    one 'could not write X', not two."""
    if str(path) in str(error):
        return error
    return OSError(error.errno, f"could not write {path}: {error.strerror or error}")


@contextlib.contextmanager
def naming(path: Path) -> Iterator[None]:
    """An OSError while writing `path` names the file."""
    try:
        yield
    except OSError as error:
        raise _naming(error, path) from None


def atomic_write_bytes(path: Path, data: bytes) -> None:
    with atomic_writer(path) as file:
        file.write(data)


def atomic_write_text(path: Path, text: str) -> None:
    atomic_write_bytes(path, text.encode())


def remove_stale_temporaries(folder: Path) -> list[Path]:
    """Delete the temporary files that writers killed mid-write left in `folder`; returns what was removed.
    Only files named as `atomic_writer` names them, and only those no live writer holds: each holds its lock
    until its file has its final name (a concurrent process's writer included, on a file system with locks)."""
    removed = []
    for tmp in Path(folder).glob(f".*{TEMP_SUFFIX}"):
        if TEMP_NAME.fullmatch(tmp.name) and _remove_unlocked(tmp):
            removed.append(tmp)
    return removed


def _remove_unlocked(tmp: Path) -> bool:
    """Remove `tmp` if no process holds its lock; False when one does, or it cannot be opened or removed."""
    try:
        fd = os.open(tmp, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:  # gone already, a link, or another user's
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        if not _still_named(fd, tmp):
            return False
        tmp.unlink()
        return True
    except OSError:  # BlockingIOError: its writer lives; or a folder this process cannot change
        return False
    finally:
        os.close(fd)


# -- reading files that anything could have written --------------------------------------------------------
# A settings file (a hyperparameter YAML, a run's config.yml, a sweep manifest, moved.json, a checkpoint's
# manifest) is untrusted: it can be huge, nested 5,000 deep (every recursive parser and printer then raises
# RecursionError), or a few hundred bytes of YAML aliases that expand to billions of values ("billion laughs":
# safe_load shares the aliased objects, so the parse is cheap, but anything that walks, compares or prints the
# value afterwards is exponential). These readers turn all of that into one UntrustedFileError line.

MAX_SETTINGS_BYTES = 1 << 20  # 1 MiB: RL Zoo's largest hyperparameter file is ~40 KB, a run's config.yml ~2 KB
MAX_NESTING = 64  # the deepest real value (a sweep manifest's cell record inside its table) is 5 levels deep
MAX_VALUES = 200_000  # values in the whole tree, counting each alias expansion (a 2k-cell sweep holds ~30k)


class UntrustedFileError(ValueError):
    """A file read back is unreadable: too large, not parseable, too deep, or too many values."""


def read_bounded_text(path: Path, limit: int = MAX_SETTINGS_BYTES) -> str:
    """The text of `path`, refused unread past `limit` bytes (a stat can lie for a FIFO or /proc file, so
    at most limit + 1 bytes are read whatever it says). OSError passes through; bad UTF-8 is refused."""
    with open(path, "rb") as file:
        data = file.read(limit + 1)
    if len(data) > limit:
        raise UntrustedFileError(f"larger than {limit} bytes, more than such a file can hold")
    try:
        return data.decode()
    except UnicodeDecodeError as error:
        raise UntrustedFileError(f"not UTF-8 text ({error.reason} at byte {error.start})") from None


def parse_json(text: str | bytes, max_values: int = MAX_VALUES) -> Any:
    """json.loads, with every failure (syntax, nesting that overflows the parser's stack) and every value
    past the bounds as an UntrustedFileError."""
    try:
        value = json.loads(text)
    except (ValueError, RecursionError) as error:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
        raise UntrustedFileError(_parse_failure(error)) from None
    check_tree(value, max_values=max_values)
    return value


def parse_yaml(text: str, max_values: int = MAX_VALUES) -> Any:
    """yaml.safe_load, likewise: YAML errors keep their line and column."""
    try:
        value = yaml.safe_load(text)
    except (yaml.YAMLError, RecursionError) as error:
        raise UntrustedFileError(_parse_failure(error)) from None
    check_tree(value, max_values=max_values)
    return value


def _parse_failure(error: BaseException) -> str:
    if isinstance(error, RecursionError):
        return "nested too deeply to parse"
    mark = getattr(error, "problem_mark", None)
    if isinstance(error, yaml.MarkedYAMLError) and mark is not None:  # one line, not YAML's snippet and caret
        return f"invalid YAML at line {mark.line + 1}, column {mark.column + 1}: {error.problem}"
    return " ".join(str(error).split())


def check_tree(value: object, max_nesting: int = MAX_NESTING, max_values: int = MAX_VALUES) -> None:
    """Refuse a parsed value nested deeper than `max_nesting` or holding more than `max_values` values once
    YAML's shared aliases are expanded. Iterative and stopping at the bound, so its cost is at most
    `max_values` steps whatever the file: after it, recursive code (printing, comparing, validating) is safe."""
    stack = [(value, 0)]
    seen = 0
    while stack:
        item, depth = stack.pop()
        seen += 1
        if seen > max_values:
            raise UntrustedFileError(f"holds more than {max_values} values (YAML aliases counted as expanded)")
        if isinstance(item, dict | list | tuple):
            if depth >= max_nesting:
                raise UntrustedFileError(f"nested more than {max_nesting} levels deep")
            children = [part for pair in item.items() for part in pair] if isinstance(item, dict) else item
            stack.extend((child, depth + 1) for child in children)
