"""One member of a checkpoint archive at a time: its bytes written as .npy, and read back without trusting
any declared size: each is checked against the manifest's, its compression, its .npy header and the shape the
reader expects (`Expected`) before it is read, in bounded chunks.
"""

from __future__ import annotations

import hashlib
import io
import math
import zipfile
from typing import Any

import numpy as np

from rlbench.store.learner_state import STATE
from rlbench.store.schema import Expected, ManifestError, describe_shape, shape_fits

COMPRESSED_PREFIXES = ("replay_buffer/",)  # large and compressible; the rest is stored as is
MAX_DEFLATE_RATIO = 1032  # deflate's limit: a member declaring more output per compressed byte is forged
READ_CHUNK = 1 << 20  # members are read (and inflated) this much at a time
NPY_HEADER_READERS = {(1, 0): np.lib.format.read_array_header_1_0, (2, 0): np.lib.format.read_array_header_2_0}

# A .npy member's header as `check_npy_header` reads it: (shape, fortran order, dtype, data offset).
NpyHeader = tuple[tuple[int, ...], bool, np.dtype[Any], int]


def npy_bytes(array: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    np.lib.format.write_array(buffer, np.asarray(array, order="C"), allow_pickle=False)  # keeps 0-d arrays 0-d
    return buffer.getvalue()


def check_declared_size(info: zipfile.ZipInfo, listed_size: int | None, expected: Expected, file_size: int) -> None:
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


def check_npy_header(archive: zipfile.ZipFile, info: zipfile.ZipInfo, expected: Expected) -> NpyHeader:
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


def read_member(archive: zipfile.ZipFile, info: zipfile.ZipInfo, keep: bool) -> tuple[str, bytearray]:
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


def as_array(data: bytearray, shape: tuple[int, ...], fortran_order: bool, dtype: np.dtype, offset: int) -> np.ndarray:
    """The array over the member's bytes, without copying them (the header was checked already)."""
    flat = np.frombuffer(data, dtype=dtype, count=math.prod(shape), offset=offset)
    return flat.reshape(shape, order="F" if fortran_order else "C")
