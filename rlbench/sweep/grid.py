"""A sweep's grid and its manifest.

The grid is algos x envs x settings x seeds: `--grid policy_delay:1,3 gamma:0.98,0.99` makes four
settings, each a set of -params tokens applied after the shared ones. A *cell* is one (algo, env,
setting, seed): one train.py run folder. A *task* is one process on a Ray worker: up to
`seeds_per_process` consecutive seeds of one (algo, env, setting), trained as one vmapped learner.

The manifest (`<log root>/sweeps/<name>/manifest.json`) records the grid and each cell's state, node,
attempts, wall time, run folder and error. Only the driver writes it, atomically. It is read back as
untrusted input: `load_manifest` checks every field it uses, and a run folder or task name in it must be
a plain relative name under the log root.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from rlbench.envs.make import env_file_name
from rlbench.errors import ConfigError
from rlbench.files import (
    MAX_SETTINGS_BYTES,
    MAX_VALUES,
    UntrustedFileError,
    atomic_write_text,
    parse_json,
    read_bounded_text,
)

MANIFEST_FILE = "manifest.json"
MANIFEST_VERSION = 1
SWEEPS_FOLDER = "sweeps"
NAME_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")

# A cell's states. `interrupted` cells resume from their checkpoint on the next invocation; `failed`
# ones are left alone unless --retry-failed asks for them again.
PENDING, RUNNING, DONE, FAILED, INTERRUPTED = "pending", "running", "done", "failed", "interrupted"
STATES = (PENDING, RUNNING, DONE, FAILED, INTERRUPTED)

# The manifest's bounds grow with the grid: a finished cell's record measured ~370 bytes and 18 JSON values
# (a 1,200-cell grid of long env and host names: 447 KB), so a flat 1 MiB would refuse an honest sweep of
# ~2,800 cells. 4 KiB a cell leaves room for long error lines; the values likewise, with room to spare.
MANIFEST_BYTES_PER_CELL = 4096
MANIFEST_VALUES_PER_CELL = 32


@dataclass(frozen=True)
class Cell:
    """One run: an algorithm on an env with one setting of the grid's keys and one seed."""

    algo: str
    env: str
    setting: tuple[tuple[str, str], ...]  # (key, value) per --grid axis, in the axes' order
    seed: int

    @property
    def setting_label(self) -> str:
        return " ".join(f"{key}={value}" for key, value in self.setting)

    @property
    def key(self) -> str:
        """The cell's id in the manifest."""
        label = ",".join(f"{key}={value}" for key, value in self.setting)
        return f"{self.algo}/{self.env}/{label or '-'}/{self.seed}"

    @property
    def group(self) -> tuple[str, str, tuple[tuple[str, str], ...]]:
        """What the seeds of one curve share: algo, env and setting."""
        return (self.algo, self.env, self.setting)

    def params(self, spec: SweepSpec) -> tuple[str, ...]:
        """The cell's -params: the shared ones, the algorithm's own (--params-for), then its setting."""
        ordered = [*spec.params, *dict(spec.params_for).get(self.algo, ()), *(f"{k}:{v}" for k, v in self.setting)]
        last = {token.partition(":")[0].strip(): token for token in ordered}  # a later token wins on its key
        return tuple(last.values())


@dataclass(frozen=True)
class Task:
    """Consecutive seeds of one (algo, env, setting): one process, one run of `len(cells)` seeds."""

    cells: tuple[Cell, ...]

    @property
    def id(self) -> str:
        """A plain folder name, the same in every invocation for the same cells (staging, logs)."""
        first = self.cells[0]
        digest = hashlib.sha256(first.key.rsplit("/", 1)[0].encode()).hexdigest()[:8]
        seeds = str(first.seed) if len(self.cells) == 1 else f"{first.seed}-{self.cells[-1].seed}"
        env = re.sub(r"[^A-Za-z0-9._-]", "_", first.env)
        return f"{first.algo}_{env}_{digest}_s{seeds}"

    @property
    def label(self) -> str:
        first = self.cells[0]
        seeds = f"seed {first.seed}" if len(self.cells) == 1 else f"seeds {first.seed}-{self.cells[-1].seed}"
        setting = f" {first.setting_label}" if first.setting else ""
        return f"{first.algo} {first.env}{setting} {seeds}"


@dataclass(frozen=True)
class SweepSpec:
    """What defines a sweep's results; the same name with another spec is refused (`grid_differences`)."""

    name: str
    algos: tuple[str, ...]
    envs: tuple[str, ...]
    seeds: tuple[int, ...]
    n_timesteps: int = -1  # -1: each hyperparameter file entry's
    params: tuple[str, ...] = ()
    params_for: tuple[tuple[str, tuple[str, ...]], ...] = ()
    grid: tuple[tuple[str, tuple[str, ...]], ...] = ()  # (key, values) per axis
    conf_file: str | None = None
    eval_freq: int = 10_000
    eval_episodes: int = 5
    file_hashes: tuple[tuple[str, str], ...] = field(default=())  # (file, sha256) of the hyperparameter files

    def settings(self) -> list[tuple[tuple[str, str], ...]]:
        axes = [[(key, value) for value in values] for key, values in self.grid]
        return [tuple(combo) for combo in itertools.product(*axes)]

    def cells(self) -> list[Cell]:
        return [
            Cell(algo, env, setting, seed)
            for algo in self.algos
            for env in self.envs
            for setting in self.settings()
            for seed in self.seeds
        ]

    def record(self) -> dict[str, Any]:
        """The spec as the manifest stores it (JSON types only)."""
        return {
            "algos": list(self.algos),
            "envs": list(self.envs),
            "seeds": list(self.seeds),
            "n_timesteps": self.n_timesteps,
            "params": list(self.params),
            "params_for": {algo: list(tokens) for algo, tokens in self.params_for},
            "grid": {key: list(values) for key, values in self.grid},
            "conf_file": self.conf_file,
            "eval_freq": self.eval_freq,
            "eval_episodes": self.eval_episodes,
            "hyperparameter_files": dict(self.file_hashes),
        }


def parse_grid(tokens: Sequence[str]) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """`--grid key:v1,v2 ...` -> ((key, (v1, v2)), ...); ConfigError naming the bad token. Values are
    -params values; a value containing a comma (a list, a dict(...)) is written inside brackets, e.g.
    `net_arch:[64,64],[256,256]` splits at the top-level commas only."""
    axes: dict[str, tuple[str, ...]] = {}
    for token in tokens:
        key, colon, values = token.partition(":")
        key = key.strip()
        if not colon or not key or not values.strip():
            raise ConfigError(f"--grid {token!r}: expected KEY:VALUE1,VALUE2,... (e.g. policy_delay:1,3)")
        if key in axes:
            raise ConfigError(f"--grid {token!r}: {key} is already an axis of the grid")
        split = _split_top_level(values)
        if any(not value for value in split):
            raise ConfigError(f"--grid {token!r}: an empty value (expected KEY:VALUE1,VALUE2,...)")
        if len(set(split)) != len(split):
            raise ConfigError(f"--grid {token!r}: a value is listed twice")
        axes[key] = tuple(split)
    return tuple(axes.items())


def _split_top_level(text: str) -> list[str]:
    parts, depth, current = [], 0, []
    for char in text:
        if char in "([{":
            depth += 1
        elif char in ")]}":
            depth -= 1
        if char == "," and depth == 0:
            parts.append("".join(current).strip())
            current = []
        else:
            current.append(char)
    parts.append("".join(current).strip())
    return parts


def make_tasks(cells: Sequence[Cell], seeds_per_process: int) -> list[Task]:
    """Cells grouped into processes: up to `seeds_per_process` consecutive seeds of one algo, env and
    setting each, in grid order."""
    tasks: list[Task] = []
    batch: list[Cell] = []
    for cell in cells:
        joins = batch and batch[-1].group == cell.group and batch[-1].seed + 1 == cell.seed
        if batch and (not joins or len(batch) == seeds_per_process):
            tasks.append(Task(tuple(batch)))
            batch = []
        batch.append(cell)
    if batch:
        tasks.append(Task(tuple(batch)))
    return tasks


def sweep_dir(log_root: Path, name: str) -> Path:
    return Path(log_root) / SWEEPS_FOLDER / name


def check_name(name: str) -> str:
    if not NAME_PATTERN.fullmatch(name):
        raise ConfigError(f"--name {name!r}: expected a plain folder name (letters, digits, '.', '_', '-')")
    return name


def default_name(algos: Sequence[str], envs: Sequence[str]) -> str:
    """`<algos>_<envs>`, e.g. sac-crossq_HalfCheetah-v4: the same command finds the same sweep again."""
    text = "-".join(algos) + "_" + "-".join(env_file_name(env) for env in envs)
    text = re.sub(r"[^A-Za-z0-9._-]", "_", text)
    if len(text) > 100:
        text = text[:90] + "_" + hashlib.sha256(text.encode()).hexdigest()[:8]
    return text


# -- the manifest --------------------------------------------------------------------------------


@dataclass
class CellRecord:
    """A cell's line in the manifest."""

    state: str = PENDING
    task: str | None = None  # the task (staging folder) that last ran it
    node: str | None = None
    attempts: int = 0
    wall_time_s: float = 0.0
    run_dir: str | None = None  # relative to the log root, once finished
    error: str | None = None
    log: str | None = None  # the last attempt's log, relative to the sweep folder
    # the final model's evaluation when the run's last one was earlier (rlbench.sweep.final_eval):
    # {"env_steps": int, "mean_return": float, "episodes": int}
    final_eval: dict[str, Any] | None = None

    def plain(self) -> dict[str, Any]:
        return dict(vars(self))


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

    def counts(self) -> dict[str, int]:
        counts = dict.fromkeys(STATES, 0)
        for record in self.cells.values():
            counts[record.state] += 1
        return counts


def now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def new_manifest(spec: SweepSpec, command: str) -> Manifest:
    return Manifest(spec.name, spec.record(), {cell.key: CellRecord() for cell in spec.cells()}, command, now())


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
        packing=data.get("packing") if isinstance(data.get("packing"), dict) else {},
    )


def _field(data: Mapping[str, Any], key: str, kind: type, where: str) -> Any:
    value = data.get(key)
    if not isinstance(value, kind):
        raise ConfigError(f"{where}: {key!r} is missing or not a {kind.__name__}")
    return value


def _cell_record(value: Any, where: str) -> CellRecord:
    if not isinstance(value, dict):
        raise ConfigError(f"{where}: not an object")
    record = CellRecord()
    state = value.get("state")
    if state not in STATES:
        raise ConfigError(f"{where}: state {state!r} is not one of {', '.join(STATES)}")
    record.state = state
    for key in ("task", "node", "error", "log", "run_dir"):
        item = value.get(key)
        if item is not None and not isinstance(item, str):
            raise ConfigError(f"{where}: {key} must be a string or null")
        setattr(record, key, item)
    if record.task is not None and not NAME_PATTERN.fullmatch(record.task):
        raise ConfigError(f"{where}: task {record.task!r} is not a plain folder name")
    if record.run_dir is not None and not is_run_dir(record.run_dir):
        raise ConfigError(f"{where}: run_dir {record.run_dir!r} is not <algo>/<folder> under the log root")
    if record.log is not None and not re.fullmatch(r"logs/[A-Za-z0-9._-]+\.log", record.log):
        raise ConfigError(f"{where}: log {record.log!r} is not logs/<file>.log")
    attempts, wall = value.get("attempts"), value.get("wall_time_s")
    if not isinstance(attempts, int) or isinstance(attempts, bool) or attempts < 0:
        raise ConfigError(f"{where}: attempts must be an integer >= 0")
    if not isinstance(wall, int | float) or isinstance(wall, bool) or wall < 0:
        raise ConfigError(f"{where}: wall_time_s must be a number >= 0")
    record.attempts, record.wall_time_s = attempts, float(wall)
    record.final_eval = check_final_eval(value.get("final_eval"), where)
    if record.state == DONE and record.run_dir is None:
        raise ConfigError(f"{where}: done without a run_dir")
    return record


def check_final_eval(value: Any, where: str) -> dict[str, Any] | None:
    if value is None:
        return None
    fields = (
        (value.get("env_steps"), value.get("mean_return"), value.get("episodes")) if isinstance(value, dict) else ()
    )
    if len(fields) != 3 or not (
        all(isinstance(item, int) and not isinstance(item, bool) and item >= 0 for item in fields[::2])
        and isinstance(fields[1], int | float)
        and not isinstance(fields[1], bool)
        and math.isfinite(fields[1])
    ):
        raise ConfigError(f"{where}: final_eval must hold env_steps, mean_return (finite) and episodes")
    return {"env_steps": fields[0], "mean_return": float(fields[1]), "episodes": fields[2]}


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
