"""Crash-safe file writing: a file appears under its final name complete, or not at all."""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

TEMP_SUFFIX = ".tmp"


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
    try:
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=TEMP_SUFFIX)
    except OSError as error:
        raise _naming(error, path) from None
    try:
        os.fchmod(fd, FILE_MODE)
        with os.fdopen(fd, "wb") as file:
            yield file
            file.flush()
            os.fsync(file.fileno())
        os.replace(tmp, path)
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


def _naming(error: OSError, path: Path) -> OSError:
    return OSError(error.errno, f"could not write {path}: {error.strerror or error}")


def atomic_write_bytes(path: Path, data: bytes) -> None:
    with atomic_writer(path) as file:
        file.write(data)


def atomic_write_text(path: Path, text: str) -> None:
    atomic_write_bytes(path, text.encode())


def remove_stale_temporaries(folder: Path) -> list[Path]:
    """Delete temporary files that a killed writer left in `folder`; returns what was removed."""
    removed = []
    for tmp in Path(folder).glob(f".*{TEMP_SUFFIX}"):
        tmp.unlink(missing_ok=True)
        removed.append(tmp)
    return removed
