"""The checkpoint file: one zip archive, no pickle, written atomically and verified when read.

Members, in the order they are written:

    state.msgpack          the learner state (flax msgpack): parameters, optimizer states, target
                           parameters, BatchRenorm statistics, log alpha, PRNG key, gradient steps
    host/<name>.npy        the host loop's arrays (observations, pending transitions, returns, ...)
    normalize/<name>.npy   with `normalize`: the running observation and return statistics (float64)
    replay_buffer/<name>.npy   optional: the filled rows of the replay buffer and its ring position
    manifest.json          format version, algorithm, env, resolved hyperparameters, spaces,
                           counters, library versions, and the SHA-256 and size of every member above

The manifest is written last, and the archive is renamed to its final name only once complete and
fsynced (`files.atomic_writer`): a file under a checkpoint's name is whole, and a torn or tampered
one fails `read_checkpoint` with `corrupt or incomplete checkpoint: <path> (<reason>)`. Arrays are
numeric `.npy` members, never pickled; nothing in the archive can carry code. A reader trusts no
declared size: each member's is checked against the manifest, its compression, its .npy header and
the shapes the reader expects (`checkpoint_schema`) before it is decompressed, in bounded chunks.
"""

from __future__ import annotations

import hashlib
import io
import json
import math
import platform
import re
import zipfile
import zlib
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import msgpack
import numpy as np
from flax import serialization

from rlbench import __version__
from rlbench.errors import ConfigError
from rlbench.files import UntrustedFileError, atomic_writer, check_tree, parse_json, remove_stale_temporaries
from rlbench.store.schema import ARCHIVE_SCHEMA, Expected, ManifestError, check_schema, describe_shape, shape_fits

FORMAT_VERSION = 3  # 1: the foundation's .msgpack + .json pair, without host state; 2: before the
# bfloat16 W^T copies moved into each network's train state (rlbench/algos/common/train_state.py)
SUFFIX = ".zip"
MANIFEST = "manifest.json"
STATE = "state.msgpack"
PERIODIC_PATTERN = re.compile(r"^rl_model_(\d+)_steps\.zip$")
COMPRESSED_PREFIXES = ("replay_buffer/",)  # large and compressible; the rest is stored as is
MAX_MANIFEST_BYTES = 64 << 20  # far above any real manifest (its per-env episode starts grow with n_envs)
MAX_DEFLATE_RATIO = 1032  # deflate's limit: a member declaring more output per compressed byte is forged
READ_CHUNK = 1 << 20  # members are read (and inflated) this much at a time
# Members every Stable-Baselines3 zip holds (RL Zoo's models too): such a file is no torn rlbench checkpoint.
SB3_MEMBERS = frozenset({"data", "policy.pth", "_stable_baselines3_version"})
NPY_HEADER_READERS = {(1, 0): np.lib.format.read_array_header_1_0, (2, 0): np.lib.format.read_array_header_2_0}


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


def _is_key(leaf: Any) -> bool:
    return jnp.issubdtype(getattr(leaf, "dtype", None), jax.dtypes.prng_key)


def _keys_as_data(tree: Any) -> Any:
    """`tree` with every typed PRNG key (the state's, gSDE's) as its raw uint32 key data."""
    return jax.tree.map(lambda leaf: jax.random.key_data(leaf) if _is_key(leaf) else leaf, tree)


def state_to_bytes(state: Any) -> bytes:
    """Every array leaf of the learner state, PRNG keys included (as their raw uint32 key data)."""
    return serialization.msgpack_serialize(serialization.to_state_dict(jax.device_get(_keys_as_data(state))))


def state_from_bytes(template: Any, data: bytes) -> Any:
    """Restore into a state of the same structure, built by the learner's init_fn from the same config.
    Raises ValueError when the saved state does not fit the template (see `check_state_fits`)."""
    restored = _restore_checked(_keys_as_data(template), data)
    return jax.tree.map(
        lambda saved, expected: jax.random.wrap_key_data(saved) if _is_key(expected) else saved, restored, template
    )


def check_state_fits(init_fn: Any, data: bytes) -> None:
    """Check, without computing anything, that a saved learner state fits the state `init_fn` builds:
    same structure, and the same shape and dtype at every leaf (flax alone would accept other shapes)."""
    _restore_checked(_state_shapes(init_fn), data)


def state_array_bytes(init_fn: Any) -> int:
    """Bytes of the arrays of `init_fn`'s learner state (the PRNG key as its raw data), from their shapes."""
    return sum(leaf.size * leaf.dtype.itemsize for leaf in jax.tree_util.tree_leaves(_state_shapes(init_fn)))


def state_size_bound(init_fn: Any) -> int:
    """The most bytes the msgpack of `init_fn`'s learner state can take: its arrays, plus a generous
    allowance per leaf for its keys and headers (a few dozen bytes in practice)."""
    n_leaves = len(jax.tree_util.tree_leaves(_state_shapes(init_fn)))
    return state_array_bytes(init_fn) + 1024 * (n_leaves + 1)


def _state_shapes(init_fn: Any) -> Any:
    """The learner state's shapes and dtypes, the PRNG key as raw key data, without computing anything."""

    return jax.eval_shape(lambda key: _keys_as_data(init_fn(key)), jax.random.key(0))


def _check_state_readable(data: bytes) -> None:
    """ManifestError unless `data` parses as msgpack no deeper than any learner state: flax's restore
    recurses into every nested map (a RecursionError from about 1,000 levels), its errors print them, and
    msgpack itself stops at 1,024. Each array's bytes are dropped as soon as they are read (the ext_hook), so
    this costs no copy of the state; values cannot outnumber bytes."""
    try:
        tree = msgpack.unpackb(data, raw=False, strict_map_key=False, ext_hook=lambda code, payload: None)
        check_tree(tree, max_values=len(data) + 1)
    except (ValueError, TypeError, RecursionError, msgpack.exceptions.UnpackException) as error:
        if isinstance(error, UntrustedFileError):
            reason = str(error)
        elif isinstance(error, RecursionError | msgpack.exceptions.StackError):
            reason = "nested too deeply to parse"
        else:
            reason = f"{type(error).__name__}: {error}"
        raise ManifestError(f"{STATE} is not a readable learner state ({reason})") from None


def _restore_checked(template: Any, data: bytes) -> Any:
    try:
        restored = serialization.from_state_dict(template, serialization.msgpack_restore(data))
    except (ValueError, KeyError, TypeError, AttributeError) as error:
        raise ValueError(f"the saved learner state does not match this configuration ({error})") from None
    saved_leaves = jax.tree_util.tree_leaves_with_path(restored)
    expected_leaves = jax.tree_util.tree_leaves(template)
    if len(saved_leaves) != len(expected_leaves):
        raise ValueError(
            f"the saved learner state has {len(saved_leaves)} arrays, this configuration "
            f"{len(expected_leaves)} (a different entropy coefficient mode or architecture?)"
        )
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


def write_checkpoint(
    path: Path, manifest: dict[str, Any], state_bytes: bytes, arrays: dict[str, np.ndarray], compress: bool = True
) -> None:
    """Write the archive atomically; `manifest` gains the format version, versions, and each member's
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
        members = ((STATE, state_bytes), *((f"{name}.npy", value) for name, value in arrays.items()))
        for name, value in members:
            data = value if name == STATE else _npy_bytes(value)
            deflate = compress and name.startswith(COMPRESSED_PREFIXES)
            compression = zipfile.ZIP_DEFLATED if deflate else zipfile.ZIP_STORED
            archive.writestr(name, data, compress_type=compression, compresslevel=1)
            checksums[name], sizes[name] = hashlib.sha256(data).hexdigest(), len(data)
        full_manifest = {
            "format_version": FORMAT_VERSION,
            **manifest,
            "versions": library_versions(),
            "members": checksums,
            "sizes": sizes,
        }
        archive.writestr(MANIFEST, json.dumps(full_manifest, indent=2, sort_keys=True, default=_json_default))


def _json_default(value: Any) -> Any:
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, Path):
        return str(value)
    raise TypeError(f"not JSON-serialisable: {type(value).__name__}")


def read_checkpoint(
    path: Path, load_replay_buffer: bool = True, expect: Callable[[dict[str, Any]], Expected] | None = None
) -> Checkpoint:
    """Read and verify every member; raise CheckpointError naming the path, the reason and, when the
    folder holds one, the newest valid periodic checkpoint.

    `expect(manifest)` checks the manifest (ManifestError) and says which members must exist, with
    which shapes, and how large the learner state may be; every declared size is checked against it
    before anything is decompressed."""
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
    if MANIFEST not in archive.namelist():
        if set(archive.namelist()) >= SB3_MEMBERS:
            raise ConfigError(
                f"{path} is a Stable-Baselines3 / RL Zoo model (a zip of PyTorch weights: data, policy.pth), which "
                "rlbench cannot load: enjoy.py and -i read only rlbench's own checkpoints (train one with train.py)"
            )
        raise ManifestError("no manifest.json: the write did not complete")
    info = archive.getinfo(MANIFEST)
    _check_declared_size(info, None, Expected(), Path(archive.filename).stat().st_size)
    if info.file_size > MAX_MANIFEST_BYTES:
        raise ManifestError(
            f"{MANIFEST} declares {info.file_size} bytes, more than a manifest can hold ({MAX_MANIFEST_BYTES})"
        )
    data = _read_member(archive, info, keep=True)[1]
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
    path: Path, load_replay_buffer: bool, parse_arrays: bool, expect: Callable[[dict[str, Any]], Expected] | None = None
) -> Checkpoint:
    """Verify every checksum (all members, or all but the replay buffer's); `parse_arrays=False` only
    verifies, leaving `arrays` empty. Every member's declared size is checked before it is read."""
    file_size = _check_file(path).stat().st_size
    with _reported_as_corrupt(path):
        archive = zipfile.ZipFile(path)
    with archive:
        with _reported_as_corrupt(path):
            manifest = _parse_manifest(archive, path)
        # Only its ManifestError means a corrupt file: a ConfigError (exit 2), or a bug, must not read as one.
        with _reported_as_corrupt(path, only_manifest=True):
            expected = Expected() if expect is None else expect(manifest)
        with _reported_as_corrupt(path):
            expected.check_file_holds(file_size)
            infos = _listed_members(archive, manifest, expected, file_size)
            state_bytes, arrays = b"", {}
            for name, info in infos.items():
                if name.startswith("replay_buffer/") and not load_replay_buffer:
                    continue
                header = _check_npy_header(archive, info, expected) if name != STATE else None
                checksum, data = _read_member(archive, info, keep=parse_arrays or name == STATE)
                if checksum != manifest["members"][name]:
                    raise ManifestError(f"checksum mismatch in {name}")
                if name == STATE:
                    state_bytes = bytes(data)
                    if expected.learner_state:
                        _check_state_readable(state_bytes)
                elif parse_arrays:
                    arrays[name.removesuffix(".npy")] = _array(data, *header)
    if not state_bytes:
        raise CheckpointError(path, "no learner state")
    return Checkpoint(path=path, manifest=manifest, state_bytes=state_bytes, arrays=arrays)


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
    archive: zipfile.ZipFile, manifest: dict[str, Any], expected: Expected, file_size: int
) -> dict[str, zipfile.ZipInfo]:
    """The members the manifest lists; ManifestError for any member unlisted, missing, repeated or no
    part of a checkpoint, and for any declared size that `_check_declared_size` refuses."""
    counts = Counter(archive.namelist())
    listed = manifest["members"]
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
        _check_declared_size(info, (manifest.get("sizes") or {}).get(info.filename), expected, file_size)
    return infos


def _check_declared_size(info: zipfile.ZipInfo, listed_size: int | None, expected: Expected, file_size: int) -> None:
    """A member's declared size must match the manifest's and fit its compression: a stored member holds
    exactly its bytes (so the file bounds it), a deflated one (the replay buffer's) no more than deflate
    can produce. The learner state must fit the configuration's."""
    name, size, compressed = info.filename, info.file_size, info.compress_size
    if listed_size is not None and size != listed_size:
        raise ManifestError(f"{name} declares {size} bytes, the manifest lists {listed_size}")
    if info.header_offset + compressed > file_size:
        raise ManifestError(f"{name} declares {compressed} compressed bytes, more than the file holds")
    deflatable = name.startswith(COMPRESSED_PREFIXES)
    if info.compress_type == zipfile.ZIP_STORED:
        if size != compressed:
            raise ManifestError(f"{name} is stored uncompressed in {compressed} bytes but declares {size}")
    elif info.compress_type == zipfile.ZIP_DEFLATED and deflatable:
        if size > MAX_DEFLATE_RATIO * compressed + 1024:
            raise ManifestError(
                f"{name} declares {size} bytes from {compressed} compressed bytes, more than deflate can produce"
            )
    else:
        raise ManifestError(
            f"{name} uses compression method {info.compress_type}; rlbench stores it "
            f"{'deflated or ' if deflatable else ''}uncompressed"
        )
    if name == STATE and expected.state_bytes is not None and size > expected.state_bytes:
        raise ManifestError(
            f"{STATE} declares {size} bytes, more than this configuration's learner state "
            f"needs ({expected.state_bytes})"
        )


def _check_npy_header(archive: zipfile.ZipFile, info: zipfile.ZipInfo, expected: Expected) -> tuple:
    """Read only the .npy header (a bounded read) and check that the member's declared size is exactly
    what its shape and dtype need, and the shape what `expected` requires. Returns (shape, fortran
    order, dtype, data offset)."""
    name = info.filename
    try:
        with archive.open(info) as stream:
            version = np.lib.format.read_magic(stream)
            if version not in NPY_HEADER_READERS:
                raise ValueError(f"unsupported .npy format version {version}")
            shape, fortran_order, dtype = NPY_HEADER_READERS[version](stream)
            offset = stream.tell()
    except ValueError as error:
        raise ManifestError(f"{name} is not a .npy array ({error})") from None
    if dtype.hasobject or dtype.kind not in "biuf":
        raise ManifestError(f"{name} holds dtype {dtype}; checkpoints hold only numeric arrays")
    needed = offset + math.prod(shape) * dtype.itemsize
    if info.file_size != needed:
        raise ManifestError(f"{name} declares {info.file_size} bytes, its header {dtype}{list(shape)} needs {needed}")
    want, want_dtype = expected.shape_of(name.removesuffix(".npy")), expected.dtypes.get(name.removesuffix(".npy"))
    if want is not None and not shape_fits(shape, want):
        raise ManifestError(f"{name} has shape {list(shape)}, expected {describe_shape(want)}")
    if want_dtype is not None and dtype != want_dtype:
        raise ManifestError(f"{name} holds {dtype}, expected {want_dtype}")
    return shape, fortran_order, dtype, offset


def _read_member(archive: zipfile.ZipFile, info: zipfile.ZipInfo, keep: bool) -> tuple[str, bytearray]:
    """(SHA-256, the bytes if `keep`), read in chunks: a stream whose data runs past its declared size is
    cut there (and then fails its CRC), so memory never exceeds the size already checked."""
    digest, data = hashlib.sha256(), bytearray(info.file_size if keep else 0)
    view, filled = memoryview(data), 0
    with archive.open(info) as stream:
        while chunk := stream.read(READ_CHUNK):
            digest.update(chunk)
            if keep:
                view[filled : filled + len(chunk)] = chunk
            filled += len(chunk)
    if filled != info.file_size:
        raise ManifestError(f"{info.filename} holds {filled} bytes, its header declares {info.file_size}")
    return digest.hexdigest(), data


def _array(data: bytearray, shape: tuple[int, ...], fortran_order: bool, dtype: np.dtype, offset: int) -> np.ndarray:
    """The array over the member's bytes, without copying them (the header was checked already)."""
    flat = np.frombuffer(data, dtype=dtype, count=math.prod(shape), offset=offset)
    return flat.reshape(shape, order="F" if fortran_order else "C")


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
