"""The checkpoint file: one zip archive, no pickle, written atomically and verified when read.

Members, in the order they are written:

    state.msgpack          the learner state (flax msgpack): parameters, optimizer states, target
                           parameters, BatchRenorm statistics, log alpha, PRNG key, gradient steps
    host/<name>.npy        the host loop's arrays (observations, pending transitions, returns, ...)
    normalize/<name>.npy   with `normalize`: the running observation and return statistics (float64)
    replay_buffer/<name>.npy   optional: the filled rows of the replay buffer and its ring position
    manifest.json          the typed record of rlbench.store.manifest (algorithm, env, resolved
                           hyperparameters, spaces, counters, host scalars, library versions), with the
                           format version and the SHA-256 and size of every member above

The manifest is written last, and the archive is renamed to its final name only once complete and
fsynced (`files.atomic_writer`): a file under a checkpoint's name is whole, and a torn or tampered
one fails `read_checkpoint` with `corrupt or incomplete checkpoint: <path> (<reason>)`. Arrays are
numeric `.npy` members, never pickled; nothing in the archive can carry code. A reader trusts no
declared size: each member's is checked against the manifest, its compression, its .npy header and
the shapes the reader expects (rlbench.store.expectations) before it is decompressed, in bounded chunks
(rlbench.store.members); the learner state's bytes are rlbench.store.learner_state's.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import re
import zipfile
import zlib
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from rlbench.errors import ConfigError
from rlbench.files import UntrustedFileError, atomic_writer, parse_json, remove_stale_temporaries
from rlbench.store.learner_state import STATE, check_state_readable
from rlbench.store.manifest import Manifest, manifest_json, read_manifest
from rlbench.store.members import (
    COMPRESSED_PREFIXES,
    as_array,
    check_declared_size,
    check_npy_header,
    npy_bytes,
    read_member,
)
from rlbench.store.schema import ARCHIVE_SCHEMA, Expected, ManifestError, check_schema

FORMAT_VERSION = 3  # 1: the foundation's .msgpack + .json pair, without host state; 2: before the
# bfloat16 W^T copies moved into each network's train state (rlbench/algos/common/train_state.py)
MANIFEST = "manifest.json"
PERIODIC_PATTERN = re.compile(r"^rl_model_(\d+)_steps\.zip$")
MAX_MANIFEST_BYTES = 64 << 20  # far above any real manifest (its per-env episode starts grow with n_envs)
# Members every Stable-Baselines3 zip holds (RL Zoo's models too): such a file is no torn rlbench checkpoint.
SB3_MEMBERS = frozenset({"data", "policy.pth", "_stable_baselines3_version"})


class CheckpointError(Exception):
    """A checkpoint that cannot be read: corrupt, incomplete, or not a checkpoint at all (exit 1)."""

    def __init__(self, path: Path, reason: str, fallback: Path | None = None):
        self.path, self.reason, self.fallback = Path(path), reason, fallback
        hint = f"; newest valid checkpoint: {fallback}" if fallback else ""
        super().__init__(f"corrupt or incomplete checkpoint: {path} ({reason}){hint}")


@dataclass(frozen=True)
class Checkpoint:
    path: Path
    manifest: Manifest
    state_bytes: bytes
    arrays: dict[str, np.ndarray]  # "host/obs", "replay_buffer/rows", ...

    def group(self, prefix: str) -> dict[str, np.ndarray]:
        """The arrays under `prefix/`, keyed by their short name."""
        start = len(prefix) + 1
        return {name[start:]: value for name, value in self.arrays.items() if name.startswith(prefix + "/")}


def write_checkpoint(
    path: Path, manifest: Manifest, state_bytes: bytes, arrays: dict[str, np.ndarray], compress: bool = True
) -> None:
    """Write the archive atomically: the members, then `manifest` with the format version and each member's
    checksum and size (readers check the sizes before decompressing anything).

    `compress=False` stores the replay buffer as is: deflate runs at tens of MB/s on float data that
    barely shrinks (a 1M-transition HalfCheetah buffer: 160 MiB -> ~150 MiB), too slow for the
    grace period of a preemption notice, so interrupt checkpoints skip it.
    """
    path = Path(path)
    remove_stale_temporaries(path.parent)  # what a writer killed mid-save left behind
    checksums, sizes = {}, {}
    with atomic_writer(path) as file, zipfile.ZipFile(file, "w", allowZip64=True) as archive:
        # Serialised one member at a time: the buffer's bytes can be hundreds of MiB.
        npy_members = ((f"{name}.npy", npy_bytes(value)) for name, value in arrays.items())
        for name, data in itertools.chain([(STATE, state_bytes)], npy_members):
            deflate = compress and name.startswith(COMPRESSED_PREFIXES)
            compression = zipfile.ZIP_DEFLATED if deflate else zipfile.ZIP_STORED
            archive.writestr(name, data, compress_type=compression, compresslevel=1)
            checksums[name], sizes[name] = hashlib.sha256(data).hexdigest(), len(data)
        full_manifest = {
            "format_version": FORMAT_VERSION,
            **manifest_json(manifest),
            "members": checksums,
            "sizes": sizes,
        }
        archive.writestr(MANIFEST, json.dumps(full_manifest, indent=2, sort_keys=True, default=_json_default))


def _json_default(value: object) -> object:
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, Path):
        return str(value)
    raise TypeError(f"not JSON-serialisable: {type(value).__name__}")


def read_checkpoint(
    path: Path, load_replay_buffer: bool = True, expect: Callable[[Manifest], Expected] | None = None
) -> Checkpoint:
    """Read and verify every member; raise CheckpointError naming the path, the reason and, when the
    folder holds one, the newest valid periodic checkpoint.

    The manifest is checked key by key and value by value before it is used (`read_manifest`); then
    `expect(manifest)` says which members must exist, with which shapes, and how large the learner state may
    be (rlbench.store.expectations; a ManifestError there, too, means a corrupt file), and every declared
    size is checked against it before anything is decompressed."""
    path = Path(path)
    try:
        return _read(path, load_replay_buffer, parse_arrays=True, expect=expect)
    except CheckpointError as error:
        fallback = newest_valid_checkpoint(path.parent, exclude=path) if path.parent.is_dir() else None
        raise CheckpointError(error.path, error.reason, fallback) from None


def _check_file(path: Path) -> Path:
    if not path.exists():
        raise CheckpointError(path, "no such file")
    if path.is_dir():
        raise CheckpointError(path, "a directory, not a checkpoint file")
    if path.stat().st_size == 0:
        raise CheckpointError(path, "empty file")
    return path


def _parse_manifest(archive: zipfile.ZipFile, path: Path) -> dict[str, Any]:
    """manifest.json parsed, of this format version, with the members' checksums (and sizes) every reader
    checks; `read_manifest` checks the rest."""
    if MANIFEST not in archive.namelist():
        if set(archive.namelist()) >= SB3_MEMBERS:
            raise ConfigError(
                f"{path} is a Stable-Baselines3 / RL Zoo model (a zip of PyTorch weights: data, policy.pth), which "
                "rlbench cannot load: enjoy.py and -i read only rlbench's own checkpoints (train one with train.py)"
            )
        raise ManifestError("no manifest.json: the write did not complete")
    info = archive.getinfo(MANIFEST)
    assert archive.filename is not None, "the archive is opened from its path"
    check_declared_size(info, None, Expected(), Path(archive.filename).stat().st_size)
    if info.file_size > MAX_MANIFEST_BYTES:
        raise ManifestError(
            f"{MANIFEST} declares {info.file_size} bytes, more than a manifest can hold ({MAX_MANIFEST_BYTES})"
        )
    data = read_member(archive, info, keep=True)[1]
    try:  # JSON has no aliases: a file of n bytes holds fewer than n values, so only the nesting is bounded
        manifest = parse_json(bytes(data), max_values=len(data) + 1)
    except UntrustedFileError as error:
        raise ManifestError(f"unreadable manifest: {error}") from None
    if not isinstance(manifest, dict) or "format_version" not in manifest:
        raise ManifestError("manifest has no format_version: not an rlbench checkpoint")
    if manifest["format_version"] != FORMAT_VERSION:
        raise ManifestError(
            f"format version {manifest['format_version']!r}, this rlbench reads version {FORMAT_VERSION}"
        )
    check_schema(manifest, ARCHIVE_SCHEMA)
    return manifest


def _read(
    path: Path, load_replay_buffer: bool, parse_arrays: bool, expect: Callable[[Manifest], Expected] | None = None
) -> Checkpoint:
    """Verify every checksum (all members, or all but the replay buffer's); `parse_arrays=False` only
    verifies, leaving `arrays` empty. Every member's declared size is checked before it is read."""
    file_size = _check_file(path).stat().st_size
    with _reported_as_corrupt(path):
        archive = zipfile.ZipFile(path)
    with archive:
        with _reported_as_corrupt(path):
            parsed = _parse_manifest(archive, path)
        # Only its ManifestError means a corrupt file: a ConfigError (exit 2), or a bug, must not read as one.
        with _reported_as_corrupt(path, only_manifest=True):
            manifest = read_manifest(parsed)
            expected = Expected() if expect is None else expect(manifest)
        with _reported_as_corrupt(path):
            expected.check_file_holds(file_size)
            infos = _listed_members(archive, parsed["members"], parsed.get("sizes") or {}, expected, file_size)
            if not load_replay_buffer:
                infos = {name: info for name, info in infos.items() if not name.startswith("replay_buffer/")}
            state_bytes, arrays = _read_members(archive, infos, parsed["members"], expected, parse_arrays)
    if not state_bytes:
        raise CheckpointError(path, "no learner state")
    return Checkpoint(path=path, manifest=manifest, state_bytes=state_bytes, arrays=arrays)


def _read_members(
    archive: zipfile.ZipFile,
    infos: Mapping[str, zipfile.ZipInfo],
    checksums: Mapping[str, str],
    expected: Expected,
    parse_arrays: bool,
) -> tuple[bytes, dict[str, np.ndarray]]:
    """(the learner state's bytes, the arrays by name without .npy) of the members `infos`, each checked
    against its checksum; ManifestError for the first that does not fit."""
    state_bytes, arrays = b"", {}
    for name, info in infos.items():
        header = check_npy_header(archive, info, expected) if name != STATE else None
        checksum, data = read_member(archive, info, keep=parse_arrays or name == STATE)
        if checksum != checksums[name]:
            raise ManifestError(f"checksum mismatch in {name}")
        if name == STATE:
            state_bytes = bytes(data)
            if expected.learner_state:
                check_state_readable(state_bytes)
        elif parse_arrays:
            assert header is not None, "every member but the learner state's is a .npy array"
            short = name.removesuffix(".npy")
            arrays[short] = as_array(data, *header)
            if short in expected.msgpack:
                check_state_readable(arrays[short].tobytes(), name, expected.msgpack[short])
    return state_bytes, arrays


@contextmanager
def _reported_as_corrupt(path: Path, only_manifest: bool = False) -> Iterator[None]:
    """ManifestError, and (unless `only_manifest`) the errors of a torn or malformed archive, as CheckpointError."""
    torn = () if only_manifest else (zipfile.BadZipFile, OSError, EOFError, ValueError, zlib.error)
    try:
        yield
    except ManifestError as error:
        raise CheckpointError(path, str(error)) from None
    except ConfigError:  # not a checkpoint of ours at all (an SB3 model): the user's input, not a torn file
        raise
    except torn as error:
        raise CheckpointError(path, f"not a zip archive or truncated: {error}") from None


def _listed_members(
    archive: zipfile.ZipFile,
    listed: Mapping[str, str],
    sizes: Mapping[str, int],
    expected: Expected,
    file_size: int,
) -> dict[str, zipfile.ZipInfo]:
    """The members the manifest lists; ManifestError for any member unlisted, missing, repeated or no
    part of a checkpoint, and for any declared size that `check_declared_size` refuses."""
    counts = Counter(archive.namelist())
    for name, count in counts.items():
        if name not in listed and name != MANIFEST:
            raise ManifestError(f"unexpected member {name} not listed in the manifest")
        if count > 1:
            raise ManifestError(f"member {name} appears {count} times")
    for name in listed:
        if name not in counts:
            raise ManifestError(f"member {name} listed in the manifest is missing")
        if name != STATE and not (name.endswith(".npy") and expected.allows(name.removesuffix(".npy"))):
            raise ManifestError(f"unexpected member {name}: not part of an rlbench checkpoint")
    for name in expected.shapes:
        if f"{name}.npy" not in listed:
            raise ManifestError(f"member {name}.npy is missing (a resumable checkpoint holds it)")
    infos = {name: archive.getinfo(name) for name in listed}
    for info in infos.values():
        check_declared_size(info, sizes.get(info.filename), expected, file_size)
    return infos


# -- finding checkpoints ------------------------------------------------------------------------


def periodic_checkpoints(folder: Path) -> list[tuple[int, Path]]:
    """`rl_model_<steps>_steps.zip` files in `folder`, oldest first."""
    found = []
    for path in Path(folder).glob("rl_model_*_steps.zip"):
        match = PERIODIC_PATTERN.match(path.name)
        if match:
            found.append((int(match.group(1)), path))
    return sorted(found)


def newest_valid_checkpoint(folder: Path, exclude: Path | None = None) -> Path | None:
    """The highest-step periodic checkpoint in `folder` that reads and verifies completely."""
    for _, path in reversed(periodic_checkpoints(folder)):
        if exclude is not None and path.resolve() == Path(exclude).resolve():
            continue
        try:
            _read(path, load_replay_buffer=True, parse_arrays=False)
            return path
        except (CheckpointError, ConfigError):  # ConfigError: another library's model under that name
            continue
    return None


def prune_periodic_checkpoints(folder: Path, keep: int) -> None:
    """Keep the newest `keep` periodic checkpoints (0 keeps all, as RL Zoo)."""
    if keep > 0:
        for _, path in periodic_checkpoints(folder)[:-keep]:
            path.unlink(missing_ok=True)
