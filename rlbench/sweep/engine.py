"""The sweep's driver: schedule the grid's tasks on Ray, retry the ones whose process or node died, keep
the manifest, move finished runs into the log root, and write the returns report.

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
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import json
import os
import re
import shutil
import socket
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rlbench.connectivity import connection_error
from rlbench.envs.make import env_file_name
from rlbench.errors import ConfigError
from rlbench.files import UntrustedFileError, atomic_write_text, parse_json, read_bounded_text
from rlbench.redact import printable
from rlbench.run.device import split_device
from rlbench.run.exit_codes import EXIT_INTERRUPTED
from rlbench.run.experiment import RunRequest
from rlbench.run.outputs import RunOutputs, create_run_dir
from rlbench.run.signals import GracefulStop
from rlbench.sweep import private_ray
from rlbench.sweep.cell import TaskOutcome, TaskSpec, run_task, staging_dir, unpack
from rlbench.sweep.grid import (
    DONE,
    FAILED,
    INTERRUPTED,
    MANIFEST_FILE,
    PENDING,
    RUNNING,
    Cell,
    Manifest,
    SweepSpec,
    Task,
    check_final_eval,
    is_run_dir,
    load_manifest,
    make_tasks,
    new_manifest,
    sweep_dir,
)
from rlbench.sweep.packing import Packing, choose_packing, describe_need, fitting_nodes
from rlbench.sweep.progress import Progress

INSTALL_HINT = 'pip install -e ".[sweep]"'
MOVED_FILE = "moved.json"
LOCK_FILE = "driver.lock"
STOP_ANNOUNCE = "every run writes its checkpoint and stops (Ctrl-C again aborts)"
POLL_S = 1.0  # the driver's loop: results, then the board's events (each a Ray call)
EXIT_ABORTED = 130
PROCESS_LOST = "process lost"  # how a failed cell's error starts when its process died, not the run

# What train.py would record for a cell: (args.yml as a dict, command.txt) from its request and outputs.
RecordArgs = Callable[[RunRequest, RunOutputs], tuple[dict[str, Any], str]]


@dataclass(frozen=True)
class SweepOptions:
    """How to run a sweep (none of it changes its results, so none of it is part of the grid)."""

    log_root: Path
    address: str | None = None  # None: a private local Ray instance; "auto" or HOST:PORT: a running cluster
    max_retries: int = 2
    shared_fs: bool = True
    seeds_per_process: int | None = None
    cpus_per_run: float | None = None
    gpus_per_run: float | None = None
    retry_failed: bool = False
    compile_cache: str | None = None
    at_steps: int = 100_000
    report: bool = True
    # On a cluster, how long to wait for a node that fits one process (an autoscaler may be adding one)
    # before giving up; a private instance has all its nodes at the start, so it does not wait.
    node_wait_s: float = 300.0
    # Lines for the console once every check has passed (the compilation cache, a note on short runs):
    # a bad-input error is the first line printed.
    notes: tuple[str, ...] = ()


def import_ray() -> Any:
    """Ray, or ConfigError (exit 2) with the install command."""
    try:
        import ray
    except ImportError:
        raise ConfigError(f"sweeps run on Ray, which is not installed: {INSTALL_HINT}") from None
    return ray


class Board:
    """A Ray actor on the driver's node: tasks report to it (started, progress), the driver polls it, and
    it carries the driver's stop to every task."""

    def __init__(self) -> None:
        self._stop: str | None = None
        self._events: list[tuple[Any, ...]] = []

    def stop_reason(self) -> str | None:
        return self._stop

    def request_stop(self, reason: str) -> None:
        self._stop = reason

    def started(self, task_id: str, node: str, pid: int) -> None:
        self._events.append(("started", task_id, node, pid))

    def progress(self, task_id: str, env_steps: int, rate: float | None, last_eval: float | None) -> None:
        self._events.append(("progress", task_id, env_steps, rate, last_eval))

    def drain(self) -> list[tuple[Any, ...]]:
        events, self._events = self._events, []
        return events


def open_manifest(spec: SweepSpec, folder: Path, command: str) -> Manifest:
    path = folder / MANIFEST_FILE
    return load_manifest(path, spec) if path.exists() else new_manifest(spec, command)


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
    no Ray, before anything is written (a sweep folder made for the lock alone is removed again).
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
    except ConfigError:
        if new and not (folder / MANIFEST_FILE).exists():
            shutil.rmtree(folder, ignore_errors=True)
            for parent in made:  # the log root and its sweeps folder, when made for the lock alone
                with contextlib.suppress(OSError):
                    parent.rmdir()
        raise


def _run_locked(
    ray: Any,
    spec: SweepSpec,
    options: SweepOptions,
    manifest: Manifest,
    folder: Path,
    request: RunRequest,
    outputs: RunOutputs,
    record_args: RecordArgs,
    command: str,
) -> int:
    cells = {cell.key: cell for cell in spec.cells()}
    if (folder / "staging").is_dir():
        finish_moves(folder, manifest, options.log_root, cells)
    wanted = (PENDING, RUNNING, INTERRUPTED, FAILED) if options.retry_failed else (PENDING, RUNNING, INTERRUPTED)
    todo = [cell for key, cell in cells.items() if manifest.cells[key].state in wanted]
    if not todo:
        counts = manifest.counts()
        print(
            f"Sweep {spec.name}: nothing to do, all {len(cells)} cells ran earlier ({counts[DONE]} done, "
            f"{counts[FAILED]} failed{'; --retry-failed runs the failed ones again' if counts[FAILED] else ''})",
            flush=True,
        )
        manifest.save(folder)
        finish(spec, manifest, folder, options)
        return 0 if counts[DONE] == len(cells) else 1
    started = ray.is_initialized()
    if not started:
        connect(ray, options.address, request.device)
    try:
        if split_device(request.device)[0] in ("gpu", "cuda") and not ray.cluster_resources().get("GPU"):
            where = "this machine" if options.address is None else f"the cluster at --address {options.address}"
            raise ConfigError(
                f"--device {request.device}: {where} has no GPU that Ray can see; install rlbench[cuda] on a "
                "machine with an NVIDIA GPU, or use --device cpu/auto"
            )
        packing = choose_packing(
            ray.cluster_resources(),
            len(spec.seeds),
            options.seeds_per_process,
            options.cpus_per_run,
            0 if options.gpus_per_run is None and split_device(request.device)[0] == "cpu" else options.gpus_per_run,
        )
        wait_for_a_fitting_node(ray, packing, options)  # bad input: its error line comes first
        for line in options.notes:
            print(line, flush=True)
        print(f"Packing: {packing.reason}", flush=True)
        tasks = group_tasks(todo, manifest, folder, packing.seeds_per_process)
        for cell in todo:
            record = manifest.cells[cell.key]
            if record.state == FAILED:  # --retry-failed: from scratch, unless its process was lost
                if record.task and not continues(record):
                    shutil.rmtree(staging_dir(folder, record.task), ignore_errors=True)
                record.state, record.error = PENDING, None
        manifest.packing = packing.plain()
        manifest.save(folder)  # the first file the sweep writes: every check above has passed
        print(
            f"Sweep {spec.name}: {len(cells)} cells, {len(todo)} to run in {len(tasks)} processes; manifest "
            f"{folder / MANIFEST_FILE}",
            flush=True,
        )
        driver = Driver(ray, spec, options, manifest, folder, packing, request, outputs, record_args, command)
        code = driver.run(tasks)
    finally:
        if not started:
            disconnect(ray, options.address)
    with contextlib.suppress(OSError):
        (folder / "staging").rmdir()  # when nothing is left in it
    finish(spec, manifest, folder, options)
    return code


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


def continues(record: Any) -> bool:
    """Whether a cell to run continues from its staging folder's checkpoint: an interrupted one, and a
    failed one whose process was lost (README: a retried cell continues); one that failed for a reason of
    its own (a refused value, a diverging seed) starts over."""
    return record.state != FAILED or (record.error or "").startswith(PROCESS_LOST)


def connect(ray: Any, address: str | None, device: str = "auto") -> None:
    """A private local Ray instance (address None), or the running cluster at `address`. `--device gpu:N`
    gives a private instance this machine's N-th GPU only (on a cluster Ray assigns each process its GPUs,
    and the command line refuses gpu:N)."""
    # Ray's own warnings reach the console (a task no node can run, a worker killed for memory): the tasks
    # send their own output to their log files, so nothing else comes through.
    settings: dict[str, Any] = {"log_to_driver": True, "configure_logging": False}
    if address is None:
        private_ray.start(ray, gpu=split_device(device)[1], **settings)  # loopback only, its own folder and token
        return
    try:
        ray.init(address=address, **settings)
    except ConnectionError as error:
        hint = "start one with `ray start --head`"
        raise ConfigError(f"--address {address}: no Ray cluster there ({error}); {hint}") from None


def cell_device(device: str, packing: Packing) -> str:
    """A cell's --device: the packing's where the sweep's is auto; without a GPU index, because a process sees
    only the GPUs Ray gave it (as GPU 0, 1, ...), and a private instance only the GPU `--device gpu:N` named."""
    kind, _ = split_device(device)
    return packing.device if kind == "auto" else kind


def wait_for_a_fitting_node(ray: Any, packing: Packing, options: SweepOptions) -> None:
    """ConfigError (exit 2, nothing written yet) when no node can ever run one process: at once on a
    private instance, after `node_wait_s` on a cluster. Ray itself would keep the tasks pending forever."""
    deadline = time.monotonic() + (0 if options.address is None else options.node_wait_s)
    announced = False
    while True:
        nodes = [node["Resources"] for node in ray.nodes() if node.get("Alive")]
        if fitting_nodes(packing, nodes):
            return
        if time.monotonic() >= deadline:
            where = "this machine" if options.address is None else f"the cluster at --address {options.address}"
            waited = "" if options.address is None else f" after {options.node_wait_s:g} s"
            raise ConfigError(f"{where}{waited}: {describe_need(packing, nodes)}")
        if not announced:
            need = describe_need(packing, nodes)
            print(f"Waiting up to {options.node_wait_s:g} s for a node that fits one process: {need}", flush=True)
            announced = True
        time.sleep(min(POLL_S, max(0.0, deadline - time.monotonic())))


def disconnect(ray: Any, address: str | None) -> None:
    if address is None:
        private_ray.stop(ray)
    else:
        ray.shutdown()


def check_reachable(address: str) -> None:
    """ConfigError (exit 2) unless `address` is HOST:PORT of something that accepts a connection."""
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit():
        raise ConfigError(f"--address {address}: expected auto or HOST:PORT (e.g. 10.0.0.1:6379)")
    error = connection_error(host.strip("[]"), int(port), timeout_s=5)
    if error is not None:
        raise ConfigError(
            f"--address {address}: no Ray cluster answers there ({error}); start one with "
            "`ray start --head`, or leave --address out for a private one on this machine"
        )


class Driver:
    """The scheduling loop of one invocation."""

    def __init__(
        self,
        ray: Any,
        spec: SweepSpec,
        options: SweepOptions,
        manifest: Manifest,
        folder: Path,
        packing: Packing,
        request: RunRequest,
        outputs: RunOutputs,
        record_args: RecordArgs,
        command: str,
    ) -> None:
        self.ray, self.spec, self.options, self.manifest, self.folder = ray, spec, options, manifest, folder
        self.packing, self.request, self.outputs, self.record_args = packing, request, outputs, record_args
        self.command = command
        self.running: dict[Any, tuple[Task, int]] = {}  # object ref -> (task, attempt)
        self.started: set[str] = set()
        self.stopping = False
        self.progress: Progress | None = None
        self.remote = ray.remote(num_cpus=packing.cpus_per_run, num_gpus=packing.gpus_per_run, max_retries=0)(run_task)
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        here = NodeAffinitySchedulingStrategy(node_id=ray.get_runtime_context().get_node_id(), soft=False)
        self.board = ray.remote(Board).options(num_cpus=0, scheduling_strategy=here).remote()
        self.drain: Any = None  # the board's drain in flight

    def run(self, tasks: list[Task]) -> int:
        with Progress(self.manifest, tasks) as progress, GracefulStop(STOP_ANNOUNCE) as stop:
            self.progress = progress
            for task in tasks:
                self.submit(task, attempt=max(self.manifest.cells[c.key].attempts for c in task.cells) + 1)
            try:
                while self.running:
                    if stop.reason and not self.stopping:
                        self.stop(stop.reason)
                    ready, _ = self.ray.wait(list(self.running), num_returns=1, timeout=POLL_S)
                    self.read_board()  # first: a task's start is recorded before its outcome
                    for ref in ready:
                        task, attempt = self.running.pop(ref)
                        self.collect(task, attempt, ref)
                    progress.refresh()
            except KeyboardInterrupt:
                for ref in self.running:
                    self.ray.cancel(ref, force=True)
                for task, _ in self.running.values():
                    self.set_state(task, INTERRUPTED)
                self.manifest.save(self.folder)
                print(
                    f"aborted: runs stopped without a final checkpoint; the same command continues the sweep "
                    f"from their periodic checkpoints ({self.folder / MANIFEST_FILE})",
                    file=sys.stderr,
                )
                return EXIT_ABORTED
        self.manifest.save(self.folder)
        counts = self.manifest.counts()
        if self.stopping:
            print(
                f"Stopped: {counts[DONE]} done, {counts[INTERRUPTED]} interrupted (checkpoints written), "
                f"{counts[FAILED]} failed. Continue with the same command:\n  {printable(self.command)}",
                file=sys.stderr,
            )
            return EXIT_INTERRUPTED
        return 0 if counts[DONE] == len(self.manifest.cells) else 1

    # -- tasks ---------------------------------------------------------------------------------

    def submit(self, task: Task, attempt: int) -> None:
        first = task.cells[0]
        request = dataclasses.replace(
            self.request,
            algo=first.algo,
            env=first.env,
            params=first.params(self.spec),
            seed=first.seed,
            n_seeds=len(task.cells),
            device=cell_device(self.request.device, self.packing),
        )
        saved_args, command = self.record_args(request, self.outputs)
        outputs = dataclasses.replace(self.outputs, saved_args=saved_args, command=command)
        spec = TaskSpec(
            task=task,
            request=request,
            outputs=outputs,
            sweep_dir=str(self.folder.resolve()),
            shared_fs=self.options.shared_fs,
            packing=self.packing,
            compile_cache=self.options.compile_cache,
            attempt=attempt,
        )
        self.running[self.remote.remote(spec, self.board)] = (task, attempt)
        for cell in task.cells:
            record = self.manifest.cells[cell.key]
            record.task = task.id
            record.log = f"logs/{task.id}.log" if self.options.shared_fs else None
        self.view(task).state = "pending" if attempt == 1 else "retrying"

    def collect(self, task: Task, attempt: int, ref: Any) -> None:
        exceptions = self.ray.exceptions
        lost = (
            exceptions.WorkerCrashedError,
            exceptions.NodeDiedError,
            exceptions.ObjectLostError,
            exceptions.OwnerDiedError,
            exceptions.LocalRayletDiedError,
            exceptions.RaySystemError,
        )
        try:
            outcome: TaskOutcome = self.ray.get(ref)
        except exceptions.TaskCancelledError:
            self.set_state(task, INTERRUPTED)
            self.event(task, "not started (the sweep is stopping)")
            return
        except lost as error:
            self.count_attempt(task)
            reason = f"{type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}".rstrip(": ")
            if self.stopping:
                self.set_state(task, INTERRUPTED)
                self.event(task, f"process lost while stopping ({reason})")
            elif attempt <= self.options.max_retries:
                self.event(task, f"process lost ({reason}); retry {attempt} of {self.options.max_retries}")
                self.submit(task, attempt + 1)
            else:
                self.set_state(task, FAILED, error=f"{PROCESS_LOST} {attempt} times; last: {reason}")
                self.event(task, f"failed: process lost {attempt} times ({reason})")
            self.manifest.save(self.folder)
            return
        except exceptions.RayTaskError as error:  # an exception in rlbench's own code: the task's own failure
            self.count_attempt(task)
            message = str(error).strip().splitlines()[-1]
            self.set_state(task, FAILED, error=message)
            self.event(task, f"failed: {message}")
            self.manifest.save(self.folder)
            return
        self.record(task, outcome)

    def record(self, task: Task, outcome: TaskOutcome) -> None:
        """Apply a task's outcome: move the finished runs into the log root, then save the manifest."""
        for cell in task.cells:
            record = self.manifest.cells[cell.key]
            record.attempts += 1
            record.node = outcome.node
            record.wall_time_s = round(record.wall_time_s + outcome.wall_time_s, 1)
        if any(code in (EXIT_INTERRUPTED, EXIT_ABORTED) for code in outcome.codes):
            self.set_state(task, INTERRUPTED)
            self.manifest.save(self.folder)
            self.event(task, "stopped with a checkpoint; the same command continues it")
            return
        moves = {}  # the finished seeds' run folders; a failed seed's stays in the staging folder, for a look
        finals = outcome.final_evals or [None] * len(task.cells)
        for cell, code, staged, archive, final_eval in zip(
            task.cells, outcome.codes, outcome.staged, outcome.archives, finals, strict=True
        ):
            if code != 0 or (staged is None and archive is None):
                continue
            final = create_run_dir(self.options.log_root, cell.algo, env_file_name(cell.env), use_uuid=False)
            if archive is not None:
                final.rmdir()
                unpack(archive, final)
            relative = final.relative_to(self.options.log_root).as_posix()
            moves[cell.key] = {
                "staged": staged,
                "final": relative,
                "state": DONE,
                "error": None,
                "final_eval": final_eval,
            }
        staging = staging_dir(self.folder, task.id)
        if self.options.shared_fs and moves:
            atomic_write_text(staging / MOVED_FILE, json.dumps(moves, indent=1, sort_keys=True) + "\n")
            apply_moves(moves, staging, self.manifest, self.options.log_root)
        kept = f" (its files: {staging})" if self.options.shared_fs else ""
        for cell, code, error in zip(task.cells, outcome.codes, outcome.errors, strict=True):
            record = self.manifest.cells[cell.key]
            record.state = DONE if code == 0 else FAILED
            record.error = None if code == 0 else f"{error}{kept}"
            if cell.key in moves:
                record.run_dir, record.final_eval = moves[cell.key]["final"], moves[cell.key]["final_eval"]
        self.manifest.save(self.folder)
        if self.options.shared_fs:
            if all(code == 0 for code in outcome.codes):
                shutil.rmtree(staging, ignore_errors=True)
            else:
                (staging / MOVED_FILE).unlink(missing_ok=True)
        resumed = f" (continued from {outcome.resumed_from})" if outcome.resumed_from else ""
        seeds = zip(task.cells, outcome.codes, outcome.errors, strict=True)
        failed = [f"seed {cell.seed}: {error}" for cell, code, error in seeds if code]
        if failed:
            self.event(task, f"failed on {outcome.node}{resumed}: " + "; ".join(failed))
        else:
            runs = ", ".join(self.manifest.cells[c.key].run_dir or "" for c in task.cells)
            self.event(task, f"done on {outcome.node} in {outcome.wall_time_s:.0f} s{resumed} -> {runs}")

    def stop(self, reason: str) -> None:
        self.stopping = True
        self.board.request_stop.remote(reason)
        for ref, (task, _) in list(self.running.items()):
            if task.id not in self.started:
                self.ray.cancel(ref)  # not started: nothing to checkpoint

    # -- bookkeeping -----------------------------------------------------------------------------

    def read_board(self) -> None:
        """Apply the board's events. A drain empties the board, so its answer is never dropped: one that has
        not come back yet (the Board actor still starting on a busy machine) is waited for again at the next
        poll, and no other drain is sent meanwhile."""
        if self.drain is None:
            self.drain = self.board.drain.remote()
        ready, _ = self.ray.wait([self.drain], timeout=POLL_S)
        if not ready:
            return
        drain, self.drain = self.drain, None
        try:
            events = self.ray.get(drain)
        except self.ray.exceptions.RayError:  # the board is gone, and its events with it
            return
        changed = False
        for event in events:
            kind, task_id = event[0], event[1]
            view = self.progress.views.get(task_id) if self.progress else None
            if view is None:
                continue
            if kind == "started":
                if not any(task.id == task_id for task, _ in self.running.values()):
                    continue  # a start that arrived after the task's outcome
                self.started.add(task_id)
                view.state, view.node, view.attempts = "running", event[2], view.attempts + 1
                for cell in view.task.cells:
                    record = self.manifest.cells[cell.key]
                    record.state, record.node = RUNNING, event[2]
                changed = True
                self.event(view.task, f"started on {event[2]} (pid {event[3]}, attempt {view.attempts})")
            else:
                _, _, env_steps, rate, last_eval = event
                view.env_steps = max(view.env_steps, env_steps)
                view.rate = rate if rate is not None else view.rate
                view.last_eval = last_eval if last_eval is not None else view.last_eval
        if changed:
            self.manifest.save(self.folder)

    def view(self, task: Task) -> Any:
        return self.progress.views[task.id]

    def set_state(self, task: Task, state: str, error: str | None = None) -> None:
        for cell in task.cells:
            record = self.manifest.cells[cell.key]
            record.state = state
            if error is not None:
                record.error = error
        self.view(task).state = state

    def count_attempt(self, task: Task) -> None:
        for cell in task.cells:
            self.manifest.cells[cell.key].attempts += 1

    def event(self, task: Task, text: str) -> None:
        if task.id in self.progress.views:
            view = self.view(task)
            states = {self.manifest.cells[c.key].state for c in task.cells}
            if len(states) == 1 and (state := states.pop()) != RUNNING:
                view.state = state
        # printable: a failed seed's error is its log's last error line, which an env or a file may have written
        self.progress.event(f"[{self.progress.summary()}] {task.label}: {printable(text)}")


# -- moves into the log root -------------------------------------------------------------------


def apply_moves(moves: dict[str, dict[str, Any]], staging: Path, manifest: Manifest, log_root: Path) -> None:
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
        apply_moves(checked, staging, manifest, log_root)
        for key, move in checked.items():
            record = manifest.cells[key]
            record.state, record.error, record.run_dir = move["state"], move["error"], move["final"]
            record.final_eval = move["final_eval"]
        manifest.save(folder)
        shutil.rmtree(staging, ignore_errors=True)
        print(f"finished moving the runs of {staging.name} into the log root (the last driver stopped mid-move)")


def check_move(key: str, move: Any, staging: Path, manifest: Manifest, cells: Mapping[str, Cell]) -> dict[str, Any]:
    """A `moved.json` entry, read back as untrusted input: a cell of this grid, a staged folder inside the
    staging folder, a final folder of the cell's own algo and env (`<algo>/<env>_<N>`, as `record` claims it)."""
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


def check_finals(moves: Mapping[str, Mapping[str, Any]], manifest: Manifest, log_root: Path) -> None:
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


# -- the report --------------------------------------------------------------------------------


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
