"""The sweep's driver, one invocation: check the manifest, the lock and the cluster before anything is
written, decide which cells to run in which processes, hand them to the scheduling loop, and end with the
summary and the returns report.

Faults, by kind:
- a task's process or node dies (Ray raises WorkerCrashedError, NodeDiedError, ...): the task is
  submitted again, up to `max_retries` times, and continues from its last checkpoint when the log root
  is shared storage (rlbench.sweep.cell);
- a task fails for a reason of its own (a hyperparameter value resolve() refuses, a diverging seed, an
  exception in the code): its cells are marked failed with the error, never retried in this invocation;
- the driver is asked to stop (SIGINT, SIGTERM): the board tells every task to write its checkpoint and
  return, tasks not started yet are cancelled, and the sweep exits 75; the same command continues it.
  A second Ctrl-C aborts at once (exit 130); the periodic checkpoints still let the next run continue.
- the driver itself dies: its tasks die with it (Ray ties them to their owner). A run folder is moved
  into the log root only after `moved.json` records the move in its staging folder, so the next
  invocation finishes a move the driver was killed in the middle of, and no run is duplicated or lost.

The driver's parts, each a module: the cluster and its checks (cluster), the scheduling loop and its
retries and stop (scheduler), the board of task events (board), the moves into the log root (moves),
the manifest file (manifest), the live view (progress), the report (report).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import socket
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

from rlbench.errors import ConfigError
from rlbench.redact import printable
from rlbench.run.experiment import RunRequest
from rlbench.run.outputs import RunOutputs
from rlbench.sweep.cell import staging_dir
from rlbench.sweep.cluster import check_reachable, connect, disconnect, pack
from rlbench.sweep.grid import Cell, SweepSpec, Task, make_tasks, sweep_dir
from rlbench.sweep.manifest import (
    DONE,
    FAILED,
    INTERRUPTED,
    MANIFEST_FILE,
    PENDING,
    RUNNING,
    CellRecord,
    Manifest,
    open_manifest,
)
from rlbench.sweep.moves import finish_moves
from rlbench.sweep.options import SweepOptions
from rlbench.sweep.packing import Packing
from rlbench.sweep.scheduler import PROCESS_LOST, Driver, RecordArgs

INSTALL_HINT = 'pip install -e ".[sweep]"'
LOCK_FILE = "driver.lock"


def import_ray() -> ModuleType:
    """Ray, or ConfigError (exit 2) with the install command."""
    try:
        import ray
    except ImportError:
        raise ConfigError(f"sweeps run on Ray, which is not installed: {INSTALL_HINT}") from None
    return ray


def run_sweep(
    spec: SweepSpec,
    options: SweepOptions,
    request: RunRequest,
    outputs: RunOutputs,
    record_args: RecordArgs,
    command: str,
) -> int:
    """Run the sweep's unfinished cells; 0 when every cell has finished, 75 when stopped, else 1.

    `request` and `outputs` are every cell's template (algo, env, seeds and params are filled in per task).
    `command` is this invocation's command line, shell-quoted: a new manifest records it, and a stop prints
    it as the command that continues the sweep (the manifest's may be another invocation's, or forged).
    ConfigError (exit 2) for a manifest of another grid, a sweep running already, an unreachable cluster or
    no Ray, before anything is written; RunFailure (exit 1) for a private Ray instance that did not start. A
    sweep folder made for the lock alone is removed again whatever stopped the sweep before its manifest.
    """
    folder = sweep_dir(options.log_root, spec.name)
    manifest = open_manifest(spec, folder, command)
    ray = import_ray()
    if options.address not in (None, "auto"):
        check_reachable(options.address)  # Ray itself retries an unreachable address for minutes
    new = not folder.exists()
    made = [path for path in (folder.parent, Path(options.log_root)) if not path.exists()]
    try:
        with driver_lock(folder):
            return _run_locked(ray, spec, options, manifest, folder, request, outputs, record_args, command)
    except BaseException:
        if new and not (folder / MANIFEST_FILE).exists():
            shutil.rmtree(folder, ignore_errors=True)
            for parent in made:  # the log root and its sweeps folder, when made for the lock alone
                with contextlib.suppress(OSError):
                    parent.rmdir()
        raise


def _run_locked(
    ray: ModuleType,
    spec: SweepSpec,
    options: SweepOptions,
    manifest: Manifest,
    folder: Path,
    request: RunRequest,
    outputs: RunOutputs,
    record_args: RecordArgs,
    command: str,
) -> int:
    """run_sweep once its lock is held: finish a killed driver's moves, run what is left, then the report."""
    cells = {cell.key: cell for cell in spec.cells()}
    if (folder / "staging").is_dir():
        finish_moves(folder, manifest, options.log_root, cells)
    wanted = (PENDING, RUNNING, INTERRUPTED, FAILED) if options.retry_failed else (PENDING, RUNNING, INTERRUPTED)
    todo = [cell for key, cell in cells.items() if manifest.cells[key].state in wanted]
    if not todo:
        return _nothing_to_do(spec, manifest, folder, options)
    started = ray.is_initialized()
    if not started:
        connect(ray, options.address, request.device)
    try:
        packing = pack(ray, len(spec.seeds), request.device, options)  # bad input: its error line comes first
        tasks = _write_plan(spec, options, manifest, folder, packing, todo)
        driver = Driver(ray, spec, options, manifest, folder, packing, request, outputs, record_args, command)
        code = driver.run(tasks)
    finally:
        if not started:
            disconnect(ray, options.address)
    with contextlib.suppress(OSError):
        (folder / "staging").rmdir()  # when nothing is left in it
    finish(spec, manifest, folder, options)
    return code


def _write_plan(
    spec: SweepSpec, options: SweepOptions, manifest: Manifest, folder: Path, packing: Packing, todo: list[Cell]
) -> list[Task]:
    """The processes to run, said on the console and written in the manifest: the first file the sweep
    writes, once every check has passed."""
    for line in options.notes:
        print(line, flush=True)
    print(f"Packing: {packing.reason}", flush=True)
    tasks = group_tasks(todo, manifest, folder, packing.seeds_per_process)
    _start_retried_cells(todo, manifest, folder)
    manifest.packing = packing.plain()
    manifest.save(folder)
    print(
        f"Sweep {spec.name}: {len(manifest.cells)} cells, {len(todo)} to run in {len(tasks)} processes; manifest "
        f"{folder / MANIFEST_FILE}",
        flush=True,
    )
    return tasks


def _nothing_to_do(spec: SweepSpec, manifest: Manifest, folder: Path, options: SweepOptions) -> int:
    """Every cell ran in an earlier invocation: the summary and the report again, without Ray."""
    counts = manifest.counts()
    print(
        f"Sweep {spec.name}: nothing to do, all {len(manifest.cells)} cells ran earlier ({counts[DONE]} done, "
        f"{counts[FAILED]} failed{'; --retry-failed runs the failed ones again' if counts[FAILED] else ''})",
        flush=True,
    )
    manifest.save(folder)
    finish(spec, manifest, folder, options)
    return 0 if counts[DONE] == len(manifest.cells) else 1


@contextlib.contextmanager
def driver_lock(folder: Path) -> Iterator[None]:
    """One driver per sweep: a second invocation of the same sweep (same log root and name) exits 2 instead
    of writing the manifest beside the first. The kernel drops the lock when the driver dies."""
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / LOCK_FILE, "a+") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            lock.seek(0)
            raise ConfigError(
                f"sweep {folder.name} is running already ({lock.read().strip() or 'another driver'}); wait for it, "
                "or stop it first"
            ) from None
        lock.truncate(0)
        lock.write(f"driver pid {os.getpid()} on {socket.gethostname()}\n")
        lock.flush()
        yield


def group_tasks(todo: list[Cell], manifest: Manifest, folder: Path, seeds_per_process: int) -> list[Task]:
    """The processes to run: interrupted cells keep the process they were in (their checkpoint holds all its
    seeds), whatever the packing is now; the others are packed afresh."""
    kept: dict[str, list[Cell]] = {}
    fresh = []
    for cell in todo:
        task = manifest.cells[cell.key].task
        if task is not None and staging_dir(folder, task).is_dir() and continues(manifest.cells[cell.key]):
            kept.setdefault(task, []).append(cell)
        else:
            fresh.append(cell)
    return [Task(tuple(cells)) for cells in kept.values()] + make_tasks(fresh, seeds_per_process)


def continues(record: CellRecord) -> bool:
    """Whether a cell to run continues from its staging folder's checkpoint: an interrupted one, and a
    failed one whose process was lost (README: a retried cell continues); one that failed for a reason of
    its own (a refused value, a diverging seed) starts over."""
    return record.state != FAILED or (record.error or "").startswith(PROCESS_LOST)


def _start_retried_cells(todo: list[Cell], manifest: Manifest, folder: Path) -> None:
    """--retry-failed: a failed cell runs again, from scratch unless its process was lost."""
    for cell in todo:
        record = manifest.cells[cell.key]
        if record.state == FAILED:
            if record.task and not continues(record):
                shutil.rmtree(staging_dir(folder, record.task), ignore_errors=True)
            record.state, record.error = PENDING, None


def finish(spec: SweepSpec, manifest: Manifest, folder: Path, options: SweepOptions) -> None:
    """The report of the finished cells (when there is one), and the sweep's one-line summary."""
    counts = manifest.counts()
    print(f"Sweep {spec.name}: " + ", ".join(f"{n} {state}" for state, n in counts.items() if n), flush=True)
    for key, record in manifest.cells.items():
        if record.state == FAILED:
            print(f"  failed {key}: {printable(str(record.error))}", file=sys.stderr)  # the manifest's text
    if options.report and counts[DONE]:
        from rlbench.sweep.report import write_sweep_report

        path = write_sweep_report(spec, manifest, folder, options.log_root, options.at_steps)
        if path is not None:
            print(f"Report: {path}", flush=True)
        else:
            print("No report: no finished cell has an evaluation to report", flush=True)
