"""The sweep's scheduling loop (`Driver`): submit the tasks to Ray, collect each outcome, retry a task
whose process or node died, read the board's events into the manifest and the live view, and pass a stop
on to every task.

Apart from rlbench.sweep.engine, which decides what to run and checks the cluster before anything is
written: this module is what happens once the manifest is on disk.
"""

from __future__ import annotations

import dataclasses
import shutil
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

from rlbench.redact import printable
from rlbench.run.exit_codes import EXIT_ABORTED, EXIT_INTERRUPTED
from rlbench.run.experiment import RunRequest
from rlbench.run.outputs import RunOutputs
from rlbench.run.signals import GracefulStop
from rlbench.sweep.board import Board, BoardEvent, BoardHandle
from rlbench.sweep.cell import TaskOutcome, TaskSpec, run_task, staging_dir
from rlbench.sweep.cluster import POLL_S
from rlbench.sweep.grid import SweepSpec, Task
from rlbench.sweep.manifest import DONE, FAILED, INTERRUPTED, MANIFEST_FILE, RUNNING, CellState, Manifest
from rlbench.sweep.moves import MOVED_FILE, Move, claim_run_folders, record_and_apply_moves
from rlbench.sweep.options import SweepOptions
from rlbench.sweep.packing import Packing, cell_device
from rlbench.sweep.progress import Progress, TaskView

if TYPE_CHECKING:
    from ray import ObjectRef

STOP_ANNOUNCE = "every run writes its checkpoint and stops (Ctrl-C again aborts)"
PROCESS_LOST = "process lost"  # how a failed cell's error starts when its process died, not the run

# What train.py would record for a cell: (args.yml as a dict, command.txt) from its request and outputs.
RecordArgs = Callable[[RunRequest, RunOutputs], tuple[dict[str, Any], str]]


class Driver:
    """The scheduling loop of one invocation."""

    def __init__(
        self,
        ray: ModuleType,
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
        self.running: dict[ObjectRef[TaskOutcome], tuple[Task, int]] = {}  # object ref -> (task, attempt)
        self.started: set[str] = set()
        self.stopping = False
        self.progress: Progress | None = None
        self.remote = ray.remote(num_cpus=packing.cpus_per_run, num_gpus=packing.gpus_per_run, max_retries=0)(run_task)
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        here = NodeAffinitySchedulingStrategy(node_id=ray.get_runtime_context().get_node_id(), soft=False)
        self.board: BoardHandle = ray.remote(Board).options(num_cpus=0, scheduling_strategy=here).remote()
        self.drain: ObjectRef[list[BoardEvent]] | None = None  # the board's drain in flight

    def run(self, tasks: list[Task]) -> int:
        """0 when every cell of the sweep is done, 75 when stopped, 130 when aborted, else 1."""
        with Progress(self.manifest, tasks) as progress, GracefulStop(STOP_ANNOUNCE) as stop:
            self.progress = progress
            for task in tasks:
                self.submit(task, attempt=max(self.manifest.cells[c.key].attempts for c in task.cells) + 1)
            try:
                while self.running:
                    self.poll(stop.reason)
                    progress.refresh()
            except KeyboardInterrupt:
                return self.abort()
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

    def poll(self, stop_reason: str | None) -> None:
        """One turn of the loop: pass a new stop on, wait up to POLL_S for an outcome, read the board."""
        if stop_reason and not self.stopping:
            self.stop(stop_reason)
        ready, _ = self.ray.wait(list(self.running), num_returns=1, timeout=POLL_S)
        self.read_board()  # first: a task's start is recorded before its outcome
        for ref in ready:
            task, attempt = self.running.pop(ref)
            self.collect(task, attempt, ref)

    def abort(self) -> int:
        """A second Ctrl-C: every task killed at once, left to continue from its periodic checkpoints."""
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

    def stop(self, reason: str) -> None:
        self.stopping = True
        self.board.request_stop.remote(reason)
        for ref, (task, _) in list(self.running.items()):
            if task.id not in self.started:
                self.ray.cancel(ref)  # not started: nothing to checkpoint

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

    def collect(self, task: Task, attempt: int, ref: ObjectRef[TaskOutcome]) -> None:
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
            self.process_lost(task, attempt, error)
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

    def process_lost(self, task: Task, attempt: int, error: Exception) -> None:
        """A task whose process or node died: submitted again, unless the sweep is stopping or its retries
        are spent."""
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
        moves = claim_run_folders(task, outcome, self.options.log_root)
        staging = staging_dir(self.folder, task.id)
        if self.options.shared_fs and moves:
            record_and_apply_moves(moves, staging, self.options.log_root)
        self.mark_finished(task, outcome, moves, staging)
        self.manifest.save(self.folder)
        if self.options.shared_fs:
            if all(code == 0 for code in outcome.codes):
                shutil.rmtree(staging, ignore_errors=True)
            else:
                (staging / MOVED_FILE).unlink(missing_ok=True)
        self.announce(task, outcome)

    def mark_finished(self, task: Task, outcome: TaskOutcome, moves: dict[str, Move], staging: Path) -> None:
        """Each seed done (with its run folder) or failed (with its error, and where its files stayed)."""
        kept = f" (its files: {staging})" if self.options.shared_fs else ""
        for cell, code, error in zip(task.cells, outcome.codes, outcome.errors, strict=True):
            record = self.manifest.cells[cell.key]
            record.state = DONE if code == 0 else FAILED
            record.error = None if code == 0 else f"{error}{kept}"
            if cell.key in moves:
                record.run_dir, record.final_eval = moves[cell.key]["final"], moves[cell.key]["final_eval"]

    def announce(self, task: Task, outcome: TaskOutcome) -> None:
        resumed = f" (continued from {outcome.resumed_from})" if outcome.resumed_from else ""
        seeds = zip(task.cells, outcome.codes, outcome.errors, strict=True)
        failed = [f"seed {cell.seed}: {error}" for cell, code, error in seeds if code]
        if failed:
            self.event(task, f"failed on {outcome.node}{resumed}: " + "; ".join(failed))
        else:
            runs = ", ".join(self.manifest.cells[c.key].run_dir or "" for c in task.cells)
            self.event(task, f"done on {outcome.node} in {outcome.wall_time_s:.0f} s{resumed} -> {runs}")

    # -- the board's events ----------------------------------------------------------------------

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
            view = self.progress.views.get(event[1]) if self.progress else None
            if view is None:
                continue
            if event[0] == "started":
                changed = self.task_started(view, node=event[2], pid=event[3]) or changed
            else:
                show_progress(view, *event[2:])
        if changed:
            self.manifest.save(self.folder)

    def task_started(self, view: TaskView, node: str, pid: int) -> bool:
        """Record a task's start on `node`; False for a start that arrived after the task's outcome."""
        if not any(task.id == view.task.id for task, _ in self.running.values()):
            return False
        self.started.add(view.task.id)
        view.state, view.node, view.attempts = "running", node, view.attempts + 1
        for cell in view.task.cells:
            record = self.manifest.cells[cell.key]
            record.state, record.node = RUNNING, node
        self.event(view.task, f"started on {node} (pid {pid}, attempt {view.attempts})")
        return True

    # -- bookkeeping -----------------------------------------------------------------------------

    def view(self, task: Task) -> TaskView:
        assert self.progress is not None, "the live view exists while the tasks run (run)"
        return self.progress.views[task.id]

    def set_state(self, task: Task, state: CellState, error: str | None = None) -> None:
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
        assert self.progress is not None, "the live view exists while the tasks run (run)"
        if task.id in self.progress.views:
            view = self.view(task)
            states = {self.manifest.cells[c.key].state for c in task.cells}
            if len(states) == 1 and (state := states.pop()) != RUNNING:
                view.state = state
        # printable: a failed seed's error is its log's last error line, which an env or a file may have written
        self.progress.event(f"[{self.progress.summary()}] {task.label}: {printable(text)}")


def show_progress(view: TaskView, env_steps: int, rate: float | None, last_eval: float | None) -> None:
    """A progress event in the live view (the manifest keeps no progress)."""
    view.env_steps = max(view.env_steps, env_steps)
    view.rate = rate if rate is not None else view.rate
    view.last_eval = last_eval if last_eval is not None else view.last_eval
