"""A run's evaluations.npz, read as untrusted input: its evaluation env steps and mean returns, or a
warning naming the file when it is not what rlbench and RL Zoo write."""

from __future__ import annotations

import math
import zipfile
from pathlib import Path

import numpy as np

from rlbench.report.variants import warn

# 10M env steps evaluated every 1,000 with 100 episodes is 8 MB of results, so a member declaring more than
# 256 MiB (inflated, or in its .npy header) is not one.
MAX_EVALUATIONS_MEMBER_BYTES = 256 << 20


def read_curve(run: Path) -> tuple[np.ndarray, np.ndarray] | None:
    """A run's evaluation env steps [n] and mean return per evaluation [n] from its evaluations.npz; None,
    with a warning naming the file, when it is unreadable or not what rlbench and RL Zoo write."""
    path = run / "evaluations.npz"
    try:
        check_npz_sizes(path)
        with np.load(path, allow_pickle=False) as data:
            timesteps, results = np.asarray(data["timesteps"]), np.asarray(data["results"])
        if timesteps.ndim != 1 or results.ndim != 2 or len(results) != len(timesteps) or results.shape[1] == 0:
            raise ValueError(f"timesteps {timesteps.shape} and results {results.shape}: expected [n] and [n, episodes]")
        if not (np.issubdtype(timesteps.dtype, np.number) and np.issubdtype(results.dtype, np.number)):
            raise ValueError(f"timesteps {timesteps.dtype} and results {results.dtype} are not numbers")
        if np.any(np.diff(timesteps) <= 0):
            raise ValueError("timesteps do not increase")
    except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile) as error:
        warn(f"{path}: unreadable ({' '.join(str(error).split()) or type(error).__name__}); left out")
        return None
    return timesteps, results.mean(axis=1)


def run_curve(run: Path, final: tuple[int, float] | None) -> tuple[np.ndarray, np.ndarray] | None:
    """`read_curve`, with the point `final` at its end when later than its last evaluation (a run with a
    final point and no evaluations.npz has that point alone)."""
    if final is not None and not (run / "evaluations.npz").exists():
        curve: tuple[np.ndarray, np.ndarray] | None = (np.zeros(0, np.int64), np.zeros(0))
    else:
        curve = read_curve(run)
    if curve is None or final is None or (len(curve[0]) and final[0] <= curve[0][-1]):
        return curve
    return np.append(curve[0], final[0]), np.append(curve[1], final[1])


def check_npz_sizes(path: Path) -> None:
    """ValueError unless every member of the archive at `path` declares, inflated and in its .npy header,
    at most MAX_EVALUATIONS_MEMBER_BYTES: np.load would otherwise size its arrays from what the file says."""
    with zipfile.ZipFile(path) as archive:
        for info in archive.infolist():
            if info.file_size > MAX_EVALUATIONS_MEMBER_BYTES:
                raise ValueError(f"{info.filename} declares {info.file_size} bytes, more than evaluations hold")
            with archive.open(info) as member:
                read_header = {(1, 0): np.lib.format.read_array_header_1_0, (2, 0): np.lib.format.read_array_header_2_0}
                version = np.lib.format.read_magic(member)
                if version not in read_header:
                    raise ValueError(f"{info.filename}: .npy format version {version}")
                shape, _, dtype = read_header[version](member)
            if math.prod(shape) * dtype.itemsize > info.file_size:  # Python integers: no overflow
                raise ValueError(
                    f"{info.filename}'s header declares {shape} {dtype}, more than its {info.file_size} bytes"
                )
