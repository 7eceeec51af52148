"""Finished runs moved from a task's staging folder into the log root, so that no run is lost or duplicated
when the driver dies in the middle: `moved.json` in the staging folder records every move before the first
rename, and the next invocation finishes the moves it lists (`finish_moves`), each entry read back as
untrusted input.

Apart from the scheduling loop because this is file handling with its own crash-safety argument, run both
by the loop (a task's outcome) and before it (a killed driver's moves).
"""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, TypedDict

from rlbench.envs.make import env_file_name
from rlbench.errors import ConfigError
from rlbench.files import UntrustedFileError, atomic_write_text, parse_json, read_bounded_text
from rlbench.run.outputs import create_run_dir
from rlbench.sweep.cell import TaskOutcome, unpack
from rlbench.sweep.grid import Cell, Task
from rlbench.sweep.manifest import DONE, FAILED, CellState, Manifest, check_final_eval, is_run_dir

if TYPE_CHECKING:
    from rlbench.run.final_eval import FinalEval

MOVED_FILE = "moved.json"


class Move(TypedDict):
    """A finished seed's run folder on its way from the staging folder into the log root (moved.json)."""

    staged: str | None  # its folder in the staging folder; None: unpacked from the task's archive already
    final: str  # the run folder claimed for it, relative to the log root
    state: CellState  # the cell's state once moved: done (failed ones stay in the staging folder)
    error: str | None
    final_eval: FinalEval | None


def claim_run_folders(task: Task, outcome: TaskOutcome, log_root: Path) -> dict[str, Move]:
    """The finished seeds' moves, by cell key, each onto a run folder claimed in the log root (left empty for
    a staged folder, or filled with the task's archive where there is no shared storage). A failed seed's
    folder stays in the staging folder, for a look."""
    moves: dict[str, Move] = {}
    finals = outcome.final_evals or [None] * len(task.cells)
    for cell, code, staged, archive, final_eval in zip(
        task.cells, outcome.codes, outcome.staged, outcome.archives, finals, strict=True
    ):
        if code != 0 or (staged is None and archive is None):
            continue
        final = create_run_dir(log_root, cell.algo, env_file_name(cell.env), use_uuid=False)
        if archive is not None:
            final.rmdir()
            unpack(archive, final)
        relative = final.relative_to(log_root).as_posix()
        moves[cell.key] = {"staged": staged, "final": relative, "state": DONE, "error": None, "final_eval": final_eval}
    return moves


def record_and_apply_moves(moves: dict[str, Move], staging: Path, log_root: Path) -> None:
    """`moved.json` first, then the renames: a driver killed in between leaves the list for the next one."""
    atomic_write_text(staging / MOVED_FILE, json.dumps(moves, indent=1, sort_keys=True) + "\n")
    apply_moves(moves, log_root)


def apply_moves(moves: Mapping[str, Move], log_root: Path) -> None:
    """Rename each staged run folder onto its claimed (empty) folder in the log root; a move done earlier
    (the staged folder is gone, the final one is full) is skipped."""
    for move in moves.values():
        if move["staged"] is None:
            continue
        staged, final = Path(move["staged"]), Path(log_root) / move["final"]
        if staged.is_dir():
            final.mkdir(parents=True, exist_ok=True)
            os.rename(staged, final)  # onto an empty folder: atomic; the run appears complete or not at all


def finish_moves(folder: Path, manifest: Manifest, log_root: Path, cells: Mapping[str, Cell]) -> None:
    """Complete the moves a killed driver recorded in `moved.json` but had not finished or saved."""
    for moved in sorted((folder / "staging").glob(f"*/{MOVED_FILE}")):
        staging = moved.parent
        try:
            moves = parse_json(read_bounded_text(moved))  # one task's few cells: far below the 1 MiB bound
            if not isinstance(moves, dict):
                raise UntrustedFileError("not a JSON object")
            checked = {key: check_move(key, move, staging, manifest, cells) for key, move in moves.items()}
            check_finals(checked, manifest, Path(log_root))
        except (OSError, ValueError, KeyError, TypeError) as error:
            raise ConfigError(f"{moved}: unreadable ({error}); move the sweep folder away") from None
        apply_moves(checked, log_root)
        for key, move in checked.items():
            record = manifest.cells[key]
            record.state, record.error, record.run_dir = move["state"], move["error"], move["final"]
            record.final_eval = move["final_eval"]
        manifest.save(folder)
        shutil.rmtree(staging, ignore_errors=True)
        print(f"finished moving the runs of {staging.name} into the log root (the last driver stopped mid-move)")


def check_move(key: str, move: object, staging: Path, manifest: Manifest, cells: Mapping[str, Cell]) -> Move:
    """A `moved.json` entry, read back as untrusted input: a cell of this grid, a staged folder inside the
    staging folder, a final folder of the cell's own algo and env (`<algo>/<env>_<N>`, as
    `claim_run_folders` claims it)."""
    if key not in manifest.cells or key not in cells or not isinstance(move, dict):
        raise ValueError(f"{key!r} is not a cell of this sweep")
    staged, final = move.get("staged"), move.get("final")
    if staged is not None and (
        not isinstance(staged, str) or Path(staged).resolve().parent.parent != staging.resolve()
    ):
        raise ValueError(f"{key}: staged folder {staged!r} is not inside {staging}")
    cell = cells[key]
    own = rf"{re.escape(cell.algo)}/{re.escape(env_file_name(cell.env))}_[0-9]+"
    if not isinstance(final, str) or not is_run_dir(final) or not re.fullmatch(own, final):
        raise ValueError(f"{key}: {final!r} is not a run folder of {cell.algo} on {cell.env} (<algo>/<env>_<N>)")
    if move.get("state") not in (DONE, FAILED) or not isinstance(move.get("error"), str | None):
        raise ValueError(f"{key}: bad state or error")
    final_eval = check_final_eval(move.get("final_eval"), key)
    return {
        "staged": staged,
        "final": final,
        "state": move["state"],
        "error": move.get("error"),
        "final_eval": final_eval,
    }


def check_finals(moves: Mapping[str, Move], manifest: Manifest, log_root: Path) -> None:
    """Each final folder is its cell's alone: no other cell's run folder, none named twice, and where the
    move is still to do, a folder that does not exist or is the empty one the driver claimed for it (a
    move done already left the staged folder gone and the final one in place)."""
    others = {record.run_dir: key for key, record in manifest.cells.items() if record.run_dir is not None}
    finals = [move["final"] for move in moves.values()]
    for key, move in moves.items():
        final = log_root / move["final"]
        if others.get(move["final"], key) != key or finals.count(move["final"]) > 1:
            raise ValueError(f"{key}: {move['final']} is another cell's run folder")
        pending = move["staged"] is not None and Path(move["staged"]).is_dir()
        if final.is_symlink() or (pending and final.exists() and (not final.is_dir() or any(final.iterdir()))):
            raise ValueError(f"{key}: {move['final']} exists already (the move would overwrite it)")
        if not pending and not final.is_dir():
            raise ValueError(f"{key}: neither its staged folder nor {move['final']} exists")
