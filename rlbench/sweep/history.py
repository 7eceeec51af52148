"""A continued cell's log files, whole: progress.csv and the Monitor files of every attempt, as one
uninterrupted run writes them.

A continuation trains in a new run folder of the cell's staging folder, as `train.py -i` does: its
evaluations.npz holds the whole history (the checkpoint carries it), but its progress.csv and Monitor files
start at the checkpoint. When the cell finishes, its folder gets the earlier attempts' rows in front of its
own, each attempt cut where the next one continued: progress.csv rows up to the checkpoint's env step (an
attempt killed later logged rows that the next one logs again), Monitor episodes up to the checkpoint's
episode count (the episode running at the checkpoint ends in the next attempt, which records it whole).
The attempts are found by following each checkpoint's `resumed_from` back through the staging folder.
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass
from pathlib import Path

from rlbench.files import UntrustedFileError, atomic_write_text, parse_json, read_bounded_text
from rlbench.loggers.base import STEP_KEY
from rlbench.store.checkpoint import Checkpoint, CheckpointError, read_checkpoint
from rlbench.store.metric_names import current_names

MAX_ATTEMPTS = 1000  # a chain longer than any real sweep's retries: a cycle or a forged resumed_from
MAX_LOG_BYTES = 256 << 20  # progress.csv of 10M env steps at 4 episodes a row is ~100 MB at worst


@dataclass(frozen=True)
class Attempt:
    """An earlier attempt's run folder and where the next attempt continued from (its checkpoint's counters)."""

    run_dir: Path
    env_steps: int
    episodes: int


def earlier_attempts(resumed: Checkpoint, staging: Path) -> list[Attempt]:
    """The attempts before the one that continued from `resumed`, oldest first, found through each
    checkpoint's `resumed_from`; a link that leaves the staging folder or does not read ends the chain."""
    chain: list[Attempt] = []
    path: Path | str  # the checkpoint's; its manifest names the one before as a string
    manifest, path = resumed.manifest, resumed.path
    while len(chain) < MAX_ATTEMPTS:
        chain.append(Attempt(Path(path).parent, manifest.counters.env_steps, manifest.counters.episodes))
        previous = manifest.run.resumed_from
        if previous is None or Path(previous).resolve().parent.parent.parent != staging.resolve():
            break
        try:
            manifest, path = read_checkpoint(Path(previous), load_replay_buffer=False).manifest, previous
        except CheckpointError as error:
            print(f"note: the attempts before {path} are left out of the cell's log files ({error})", flush=True)
            break
    return chain[::-1]


def keep_history(run_dir: Path, resumed: Checkpoint, staging: Path) -> None:
    """`run_dir`, a finished continuation, with its earlier attempts' rows; a note in the log when they
    cannot be read (the run itself is complete: its evaluations and models do not depend on them)."""
    try:
        join_attempts(run_dir, earlier_attempts(resumed, staging))
    except (OSError, ValueError, KeyError, TypeError) as error:
        print(f"note: {run_dir}'s progress.csv and Monitor files keep only its last attempt ({error})", flush=True)


def join_attempts(run_dir: Path, attempts: list[Attempt]) -> None:
    """Put the earlier `attempts`' progress.csv rows and Monitor episodes in front of `run_dir`'s own."""
    if not attempts:
        return
    join_progress(run_dir, attempts)
    for monitor in sorted(run_dir.glob("*.monitor.csv")):
        join_monitor(monitor, attempts)


def join_progress(run_dir: Path, attempts: list[Attempt]) -> None:
    path = run_dir / "progress.csv"
    header, rows = _read_csv(read_bounded_text(path, MAX_LOG_BYTES))
    earlier, start = [], 0
    for attempt in attempts:
        _, theirs = _read_csv(read_bounded_text(attempt.run_dir / "progress.csv", MAX_LOG_BYTES))
        theirs = [current_names(row) for row in theirs]  # an attempt from before the rename to SB3's keys
        earlier += [row for row in theirs if start < _env_steps(row) <= attempt.env_steps]
        start = attempt.env_steps
    text = io.StringIO()
    writer = csv.DictWriter(text, fieldnames=header, restval="", extrasaction="ignore")
    writer.writeheader()
    writer.writerows(earlier + rows)
    atomic_write_text(path, text.getvalue())


def join_monitor(path: Path, attempts: list[Attempt]) -> None:
    """Monitor rows in order of their time across an attempt's env files (`<i>.monitor.csv`): the first
    `episodes` of them ended before its checkpoint. Times count from the first attempt's start."""
    first_line, t_start, rows = _read_monitor(path)
    joined, episodes, first = [], 0, None
    for attempt in attempts:
        timed = []
        for file in attempt.run_dir.glob("*.monitor.csv"):
            env_index = int(file.name.split(".")[0])  # episodes ending at one step: in env order, as written
            line, start, theirs = _read_monitor(file)
            first = (line, start) if first is None and file.name == path.name else first
            timed += [(float(row["t"]) + start, env_index, file.name, row) for row in theirs]
        timed.sort(key=lambda item: item[:2])
        joined += [(t, row) for t, _, name, row in timed[: attempt.episodes - episodes] if name == path.name]
        episodes = attempt.episodes
    origin_line, origin = first if first is not None else (first_line, t_start)
    joined += [(float(row["t"]) + t_start, row) for row in rows]
    text = io.StringIO()
    writer = csv.DictWriter(text, fieldnames=("r", "l", "t"))
    writer.writeheader()
    writer.writerows({"r": row["r"], "l": row["l"], "t": round(t - origin, 6)} for t, row in joined)
    atomic_write_text(path, origin_line + "\n" + text.getvalue())


def _read_csv(text: str) -> tuple[list[str], list[dict[str, str]]]:
    reader = csv.DictReader(io.StringIO(text))
    rows = list(reader)
    return list(reader.fieldnames or []), rows


def _env_steps(row: dict[str, str]) -> float:
    try:
        return float(row.get(STEP_KEY) or "nan")
    except ValueError:
        return float("nan")  # compares false: the row is left out


def _read_monitor(path: Path) -> tuple[str, float, list[dict[str, str]]]:
    """The `#{"t_start": ...}` line, its t_start and the episode rows of an SB3 Monitor file."""
    first_line, _, rest = read_bounded_text(path, MAX_LOG_BYTES).partition("\n")
    header = parse_json(first_line.removeprefix("#"))
    if not isinstance(header, dict) or not isinstance(header.get("t_start"), int | float):
        raise UntrustedFileError(f"{path}: no t_start in its first line")
    return first_line, float(header["t_start"]), list(csv.DictReader(io.StringIO(rest)))
