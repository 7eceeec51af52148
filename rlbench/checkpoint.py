"""The checkpoint file: one zip archive, no pickle, written atomically and verified when read.

Members, in the order they are written:

    state.msgpack          the learner state (flax msgpack): parameters, optimizer states, target
                           parameters, BatchRenorm statistics, log alpha, PRNG key, gradient steps
    host/<name>.npy        the host loop's arrays (observations, pending transitions, returns, ...)
    replay_buffer/<name>.npy   optional: the filled rows of the replay buffer and its ring position
    manifest.json          format version, algorithm, env, resolved hyperparameters, spaces,
                           counters, library versions, and the SHA-256 of every member above

The manifest is written last, and the archive is renamed to its final name only once complete and
fsynced (`files.atomic_writer`): a file under a checkpoint's name is whole, and a torn or tampered
one fails `read_checkpoint` with `corrupt or incomplete checkpoint: <path> (<reason>)`. Arrays are
`.npy` members read with `allow_pickle=False`; nothing in the archive can carry code.
"""

from __future__ import annotations

import hashlib
import io
import json
import platform
import re
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jax
import numpy as np
from flax import serialization

from rlbench import __version__
from rlbench.files import atomic_writer, remove_stale_temporaries

FORMAT_VERSION = 2  # 1: the foundation's .msgpack + .json pair, without host state
SUFFIX = ".zip"
MANIFEST = "manifest.json"
STATE = "state.msgpack"
PERIODIC_PATTERN = re.compile(r"^rl_model_(\d+)_steps\.zip$")
COMPRESSED_PREFIXES = ("replay_buffer/",)  # large and compressible; the rest is stored as is


class CheckpointError(Exception):
    """A checkpoint that cannot be read: corrupt, incomplete, or not a checkpoint at all (exit 1)."""

    def __init__(self, path: Path, reason: str, fallback: Path | None = None):
        self.path, self.reason, self.fallback = Path(path), reason, fallback
        hint = f"; newest valid checkpoint: {fallback}" if fallback else ""
        super().__init__(f"corrupt or incomplete checkpoint: {path} ({reason}){hint}")


@dataclass(frozen=True)
class Checkpoint:
    path: Path
    manifest: dict[str, Any]
    state_bytes: bytes
    arrays: dict[str, np.ndarray]  # "host/obs", "replay_buffer/rows", ...

    def group(self, prefix: str) -> dict[str, np.ndarray]:
        """The arrays under `prefix/`, keyed by their short name."""
        start = len(prefix) + 1
        return {name[start:]: value for name, value in self.arrays.items() if name.startswith(prefix + "/")}


# -- learner state ------------------------------------------------------------------------------

def state_to_bytes(state: Any) -> bytes:
    """Every array leaf of the learner state, PRNG key included (as its raw uint32 key data)."""
    state = state.replace(key=jax.random.key_data(state.key))
    return serialization.msgpack_serialize(serialization.to_state_dict(jax.device_get(state)))


def state_from_bytes(template: Any, data: bytes) -> Any:
    """Restore into a state of the same structure, built by the learner's init_fn from the same config.
    Raises ValueError when the saved state does not fit the template (see `check_state_fits`)."""
    template = template.replace(key=jax.random.key_data(template.key))
    restored = _restore_checked(template, data)
    return restored.replace(key=jax.random.wrap_key_data(restored.key))


def check_state_fits(init_fn: Any, data: bytes) -> None:
    """Check, without computing anything, that a saved learner state fits the state `init_fn` builds:
    same structure, and the same shape and dtype at every leaf (flax alone would accept other shapes)."""

    def init_raw(key):
        state = init_fn(key)
        return state.replace(key=jax.random.key_data(state.key))

    _restore_checked(jax.eval_shape(init_raw, jax.random.key(0)), data)


def _restore_checked(template: Any, data: bytes) -> Any:
    try:
        restored = serialization.from_state_dict(template, serialization.msgpack_restore(data))
    except (ValueError, KeyError, TypeError, AttributeError) as error:
        raise ValueError(f"the saved learner state does not match this configuration ({error})") from None
    saved_leaves = jax.tree_util.tree_leaves_with_path(restored)
    expected_leaves = jax.tree_util.tree_leaves(template)
    if len(saved_leaves) != len(expected_leaves):
        raise ValueError(f"the saved learner state has {len(saved_leaves)} arrays, this configuration "
                         f"{len(expected_leaves)} (a different entropy coefficient mode or architecture?)")
    for (path, saved), expected in zip(saved_leaves, expected_leaves, strict=True):
        shape, dtype = np.shape(saved), np.asarray(saved).dtype
        if shape != tuple(expected.shape) or dtype != expected.dtype:
            raise ValueError(
                f"the saved learner state does not match this configuration at {jax.tree_util.keystr(path)}: "
                f"saved {dtype}{list(shape)}, configured {expected.dtype}{list(expected.shape)}"
            )
    return restored


def library_versions() -> dict[str, str]:
    import flax
    import gymnasium
    import optax

    return {
        "rlbench": __version__,
        "jax": jax.__version__,
        "flax": flax.__version__,
        "optax": optax.__version__,
        "gymnasium": gymnasium.__version__,
        "numpy": np.__version__,
        "python": platform.python_version(),
        "backend": jax.default_backend(),
    }


# -- the archive --------------------------------------------------------------------------------

def _npy_bytes(array: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    np.lib.format.write_array(buffer, np.asarray(array, order="C"), allow_pickle=False)  # keeps 0-d arrays 0-d
    return buffer.getvalue()


def write_checkpoint(path: Path, manifest: dict[str, Any], state_bytes: bytes,
                     arrays: dict[str, np.ndarray], compress: bool = True) -> None:
    """Write the archive atomically; `manifest` gains the format version, versions and checksums.

    `compress=False` stores the replay buffer as is: deflate runs at tens of MB/s on float data that
    barely shrinks (a 1M-transition HalfCheetah buffer: 160 MiB -> ~150 MiB), too slow for the
    grace period of a preemption notice, so interrupt checkpoints skip it.
    """
    path = Path(path)
    remove_stale_temporaries(path.parent)  # what a writer killed mid-save left behind
    checksums = {}
    with atomic_writer(path) as file, zipfile.ZipFile(file, "w", allowZip64=True) as archive:
        # Serialised one member at a time: the buffer's bytes can be hundreds of MiB.
        members = ((STATE, state_bytes), *((f"{name}.npy", value) for name, value in arrays.items()))
        for name, value in members:
            data = value if name == STATE else _npy_bytes(value)
            deflate = compress and name.startswith(COMPRESSED_PREFIXES)
            compression = zipfile.ZIP_DEFLATED if deflate else zipfile.ZIP_STORED
            archive.writestr(name, data, compress_type=compression, compresslevel=1)
            checksums[name] = hashlib.sha256(data).hexdigest()
        full_manifest = {"format_version": FORMAT_VERSION, **manifest, "versions": library_versions(),
                         "members": checksums}
        archive.writestr(MANIFEST, json.dumps(full_manifest, indent=2, sort_keys=True, default=_json_default))


def _json_default(value: Any) -> Any:
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, Path):
        return str(value)
    raise TypeError(f"not JSON-serialisable: {type(value).__name__}")


def read_checkpoint(path: Path, load_replay_buffer: bool = True) -> Checkpoint:
    """Read and verify every member; raise CheckpointError naming the path, the reason and, when the
    folder holds one, the newest valid periodic checkpoint."""
    path = Path(path)
    try:
        return _read(path, load_replay_buffer, parse_arrays=True)
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


def _parse_manifest(path: Path, archive: zipfile.ZipFile) -> dict[str, Any]:
    if MANIFEST not in archive.namelist():
        raise CheckpointError(path, "no manifest.json: the write did not complete")
    try:
        manifest = json.loads(archive.read(MANIFEST))
    except (json.JSONDecodeError, UnicodeDecodeError, zipfile.BadZipFile) as error:
        raise CheckpointError(path, f"unreadable manifest: {error}") from None
    if not isinstance(manifest, dict) or "format_version" not in manifest:
        raise CheckpointError(path, "manifest has no format_version: not an rlbench checkpoint")
    if manifest["format_version"] != FORMAT_VERSION:
        raise CheckpointError(path, f"format version {manifest['format_version']}, this rlbench reads "
                                    f"version {FORMAT_VERSION}")
    return manifest


def _read(path: Path, load_replay_buffer: bool, parse_arrays: bool) -> Checkpoint:
    """Verify every checksum (all members, or all but the replay buffer's); `parse_arrays=False` only
    verifies, leaving `arrays` empty."""
    _check_file(path)
    try:
        with zipfile.ZipFile(path) as archive:
            manifest = _parse_manifest(path, archive)
            expected = manifest.get("members", {})
            present = set(archive.namelist()) - {MANIFEST}
            if present != set(expected):
                raise CheckpointError(path, f"members {sorted(present ^ set(expected))} differ from the manifest")
            state_bytes, arrays = b"", {}
            for name, checksum in expected.items():
                if name.startswith("replay_buffer/") and not load_replay_buffer:
                    continue
                data = archive.read(name)
                if hashlib.sha256(data).hexdigest() != checksum:
                    raise CheckpointError(path, f"checksum mismatch in {name}")
                if name == STATE:
                    state_bytes = data
                elif parse_arrays:
                    arrays[name.removesuffix(".npy")] = np.lib.format.read_array(io.BytesIO(data), allow_pickle=False)
    except (zipfile.BadZipFile, OSError, EOFError, ValueError) as error:
        raise CheckpointError(path, f"not a zip archive or truncated: {error}") from None
    if not state_bytes:
        raise CheckpointError(path, "no learner state")
    return Checkpoint(path=path, manifest=manifest, state_bytes=state_bytes, arrays=arrays)


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
        except CheckpointError:
            continue
    return None


def prune_periodic_checkpoints(folder: Path, keep: int) -> None:
    """Keep the newest `keep` periodic checkpoints (0 keeps all, as RL Zoo)."""
    if keep > 0:
        for _, path in periodic_checkpoints(folder)[:-keep]:
            path.unlink(missing_ok=True)
