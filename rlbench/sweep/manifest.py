"""A sweep's manifest (`<log root>/sweeps/<name>/manifest.json`): the grid it was started with and each
cell's state, node, attempts, wall time, run folder and error.

Only the driver writes it, atomically. It is read back as untrusted input: `load_manifest` checks every
field it uses, and a run folder or task name in it must be a plain relative name under the log root. Apart
from rlbench.sweep.grid because the grid is pure values and this is a file, with its states and its checks.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, Literal, TypeGuard, TypeVar

from rlbench.errors import ConfigError
from rlbench.files import (
    MAX_SETTINGS_BYTES,
    MAX_VALUES,
    UntrustedFileError,
    atomic_write_text,
    parse_json,
    read_bounded_text,
)
from rlbench.redact import printable
from rlbench.sweep.grid import NAME_PATTERN, SweepSpec

if TYPE_CHECKING:
    from rlbench.run.final_eval import FinalEval

T = TypeVar("T")

MANIFEST_FILE = "manifest.json"
MANIFEST_VERSION = 1

# A cell's states. `interrupted` cells resume from their checkpoint on the next invocation; `failed`
# ones are left alone unless --retry-failed asks for them again.
CellState = Literal["pending", "running", "done", "failed", "interrupted"]
PENDING: Final = "pending"
RUNNING: Final = "running"
DONE: Final = "done"
FAILED: Final = "failed"
INTERRUPTED: Final = "interrupted"
STATES: tuple[CellState, ...] = (PENDING, RUNNING, DONE, FAILED, INTERRUPTED)

# The manifest's bounds grow with the grid: a finished cell's record measured ~370 bytes and 18 JSON values
# (a 1,200-cell grid of long env and host names: 447 KB), so a flat 1 MiB would refuse an honest sweep of
# ~2,800 cells. 4 KiB a cell leaves room for long error lines; the values likewise, with room to spare.
MANIFEST_BYTES_PER_CELL = 4096
MANIFEST_VALUES_PER_CELL = 32
# A cell's free-text strings, shown in the sweep's report and on the console: one printable line each, within
# these bounds (the driver writes them so; `load_manifest` refuses others). A node is `<hostname>/<node id>`
# (a hostname has at most 253 characters); an error is one line of a run's output, cut at 1,000 characters
# (its whole text stays in the cell's log).
TEXT_BOUNDS = {"node": 300, "error": 1000}


@dataclass
class CellRecord:
    """A cell's line in the manifest."""

    state: CellState = PENDING
    task: str | None = None  # the task (staging folder) that last ran it
    node: str | None = None
    attempts: int = 0
    wall_time_s: float = 0.0
    run_dir: str | None = None  # relative to the log root, once finished
    error: str | None = None
    log: str | None = None  # the last attempt's log, relative to the sweep folder
    # the final model's evaluation when the run's last one was earlier (rlbench.sweep.final_eval)
    final_eval: FinalEval | None = None

    def plain(self) -> dict[str, Any]:
        """The record as saved: its node and error each one printable line within its bound."""
        data = dict(vars(self))
        for key, bound in TEXT_BOUNDS.items():
            if data[key] is not None:
                text = printable(data[key])
                data[key] = text if len(text) <= bound else text[: bound - 3] + "..."
        return data


@dataclass
class Manifest:
    name: str
    grid: dict[str, Any]
    cells: dict[str, CellRecord]
    command: str = ""
    created: str = ""
    packing: dict[str, Any] = field(default_factory=dict)

    def save(self, folder: Path) -> None:
        data = {
            "version": MANIFEST_VERSION,
            "name": self.name,
            "created": self.created,
            "updated": now(),
            "command": self.command,
            "grid": self.grid,
            "packing": self.packing,
            "cells": {key: record.plain() for key, record in self.cells.items()},
        }
        folder.mkdir(parents=True, exist_ok=True)
        atomic_write_text(folder / MANIFEST_FILE, json.dumps(data, indent=1, sort_keys=True) + "\n")

    def counts(self) -> dict[CellState, int]:
        counts = dict.fromkeys(STATES, 0)
        for record in self.cells.values():
            counts[record.state] += 1
        return counts


def now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def new_manifest(spec: SweepSpec, command: str) -> Manifest:
    return Manifest(spec.name, spec.record(), {cell.key: CellRecord() for cell in spec.cells()}, command, now())


def open_manifest(spec: SweepSpec, folder: Path, command: str) -> Manifest:
    """The manifest in the sweep's `folder`, checked against `spec`; a new one (not written yet) when none."""
    path = folder / MANIFEST_FILE
    return load_manifest(path, spec) if path.exists() else new_manifest(spec, command)


def load_manifest(path: Path, spec: SweepSpec) -> Manifest:
    """The manifest at `path`, checked field by field; ConfigError naming the file and the field that is
    wrong, or the grid's differences from `spec` (a changed grid under the same name)."""
    where = f"{path}"
    n_cells = len(spec.cells())
    try:
        text = read_bounded_text(path, MAX_SETTINGS_BYTES + n_cells * MANIFEST_BYTES_PER_CELL)
        data = parse_json(text, max_values=MAX_VALUES + n_cells * MANIFEST_VALUES_PER_CELL)
    except (OSError, UntrustedFileError) as error:
        raise ConfigError(f"{where}: unreadable ({error}); move the sweep folder away, or use another --name") from None
    if not isinstance(data, dict) or data.get("version") != MANIFEST_VERSION:
        raise ConfigError(f"{where}: not a version-{MANIFEST_VERSION} sweep manifest")
    grid = _field(data, "grid", dict, where)
    changes = grid_differences(grid, spec.record())
    if changes:
        raise ConfigError(
            f"sweep {spec.name!r} in {path.parent} was started with another grid ("
            + "; ".join(changes)
            + "); use another --name, or move that folder away"
        )
    raw_cells = _field(data, "cells", dict, where)
    packing = data.get("packing")
    expected = {cell.key for cell in spec.cells()}
    if set(raw_cells) != expected:
        raise ConfigError(f"{where}: its cells are not the grid's (the file was edited); move the sweep folder away")
    cells = {key: _cell_record(value, f"{where}: cell {key}") for key, value in raw_cells.items()}
    return Manifest(
        name=spec.name,
        grid=grid,
        cells=cells,
        command=str(data.get("command", "")),
        created=str(data.get("created", "")),
        packing=packing if isinstance(packing, dict) else {},
    )


def _field(data: Mapping[str, Any], key: str, kind: type[T], where: str) -> T:
    value = data.get(key)
    if not isinstance(value, kind):
        raise ConfigError(f"{where}: {key!r} is missing or not a {kind.__name__}")
    return value


def _cell_record(value: object, where: str) -> CellRecord:
    if not isinstance(value, dict):
        raise ConfigError(f"{where}: not an object")
    record = CellRecord()
    state = value.get("state")
    if state not in STATES:
        raise ConfigError(f"{where}: state {state!r} is not one of {', '.join(STATES)}")
    record.state = state
    _read_names(value, record, where)
    record.attempts, record.wall_time_s = _read_counters(value, where)
    record.final_eval = check_final_eval(value.get("final_eval"), where)
    if record.state == DONE and record.run_dir is None:
        raise ConfigError(f"{where}: done without a run_dir")
    return record


def _read_names(value: Mapping[str, Any], record: CellRecord, where: str) -> None:
    """The record's strings; those that name a file or folder must be plain relative names."""
    for key in ("task", "node", "error", "log", "run_dir"):
        item = value.get(key)
        if item is not None and not isinstance(item, str):
            raise ConfigError(f"{where}: {key} must be a string or null")
        if item is not None and key in TEXT_BOUNDS and (len(item) > TEXT_BOUNDS[key] or printable(item) != item):
            raise ConfigError(
                f"{where}: {key} must be one line of at most {TEXT_BOUNDS[key]} characters without control characters"
            )
        setattr(record, key, item)
    if record.task is not None and not NAME_PATTERN.fullmatch(record.task):
        raise ConfigError(f"{where}: task {record.task!r} is not a plain folder name")
    if record.run_dir is not None and not is_run_dir(record.run_dir):
        raise ConfigError(f"{where}: run_dir {record.run_dir!r} is not <algo>/<folder> under the log root")
    if record.log is not None and not re.fullmatch(r"logs/[A-Za-z0-9._-]+\.log", record.log):
        raise ConfigError(f"{where}: log {record.log!r} is not logs/<file>.log")


def _read_counters(value: Mapping[str, Any], where: str) -> tuple[int, float]:
    """(attempts, wall_time_s)."""
    attempts, wall = value.get("attempts"), value.get("wall_time_s")
    if not isinstance(attempts, int) or isinstance(attempts, bool) or attempts < 0:
        raise ConfigError(f"{where}: attempts must be an integer >= 0")
    if not isinstance(wall, int | float) or isinstance(wall, bool) or wall < 0:
        raise ConfigError(f"{where}: wall_time_s must be a number >= 0")
    return attempts, float(wall)


def check_final_eval(value: object, where: str) -> FinalEval | None:
    if value is None:
        return None
    if isinstance(value, dict):
        env_steps, mean_return, episodes = value.get("env_steps"), value.get("mean_return"), value.get("episodes")
        if (
            _is_count(env_steps)
            and _is_count(episodes)
            and isinstance(mean_return, int | float)
            and not isinstance(mean_return, bool)
            and math.isfinite(mean_return)
        ):
            return {"env_steps": env_steps, "mean_return": float(mean_return), "episodes": episodes}
    raise ConfigError(f"{where}: final_eval must hold env_steps, mean_return (finite) and episodes")


def _is_count(item: object) -> TypeGuard[int]:
    return isinstance(item, int) and not isinstance(item, bool) and item >= 0


def is_run_dir(text: str) -> bool:
    parts = text.split("/")
    return len(parts) == 2 and all(NAME_PATTERN.fullmatch(part) for part in parts)


def grid_differences(recorded: Mapping[str, Any], wanted: Mapping[str, Any]) -> list[str]:
    """`key: <there> there, <now> now` for each grid entry that differs."""
    return [
        f"{key}: {json.dumps(recorded.get(key))} there, {json.dumps(wanted.get(key))} now"
        for key in dict.fromkeys([*recorded, *wanted])
        if recorded.get(key) != wanted.get(key)
    ]
