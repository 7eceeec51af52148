"""One task of a sweep, run on a Ray worker: a train.py run of one or more seeds, without a command line.

The task resolves its `RunRequest` (rlbench.run.experiment) and runs it with rlbench.run.launch into a staging
folder, so that a run folder appears under the log root only once it is finished (the driver moves it
there). On shared storage the staging folder is `<sweep>/staging/<task>/` and outlives the process: a
retried or re-run task continues from the newest valid checkpoint in it (sweeps save checkpoints with
their replay buffer by default, so the continuation is bit-exact), in a new run folder as `train.py -i`
does; when it finishes, the earlier attempts' progress.csv rows and Monitor episodes are put in front of
its own (rlbench.sweep.history), so the cell's folder is what one uninterrupted run writes. Without shared
storage it is a temporary folder on the worker's node, the finished run folders go back to the driver as
tar archives through Ray's object store, and a retried task starts from scratch. A finished run whose last
evaluation came before its last env step has its final model evaluated for the report (final_eval).

A task pins every thread of its worker process to its own cores (a lock file per core, held for the task
and released by the kernel if the process dies, so two nodes on one machine never share a core either).
Ray reuses worker processes for later tasks, which keeps the JAX state (imports, compiled updates); such a
task pins the process again, to whatever cores are free then. Its output goes to its log file, not the
driver's terminal.
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import os
import re
import shutil
import signal
import socket
import sys
import tarfile
import tempfile
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from types import FrameType
from typing import TYPE_CHECKING

from rlbench.run.experiment import RunRequest
from rlbench.run.outputs import RunOutputs
from rlbench.run.signals import SignalScope
from rlbench.sweep.board import BoardHandle
from rlbench.sweep.cores import ALLOWED_CORES, claim_cores, pin_process, release_cores
from rlbench.sweep.final_eval import final_evaluations
from rlbench.sweep.grid import Task
from rlbench.sweep.history import keep_history
from rlbench.sweep.packing import Packing
from rlbench.types import PyTree

if TYPE_CHECKING:
    from rlbench.loop.evaluation import EvalResult
    from rlbench.run.final_eval import FinalEval

STOP_POLL_S = 1.0  # how often a task asks the driver's board whether the sweep is stopping (a non-blocking call)
PROGRESS_EVERY_S = 5.0


@dataclass(frozen=True)
class TaskSpec:
    """Everything a task needs, sent from the driver (plain data: no handles, no paths of the driver's)."""

    task: Task
    request: RunRequest  # seed = the first seed, n_seeds = len(cells); log_folder is replaced by the staging folder
    outputs: RunOutputs
    sweep_dir: str
    shared_fs: bool
    packing: Packing
    compile_cache: str | None
    attempt: int


@dataclass
class TaskOutcome:
    """What the driver needs back: one exit code and error per seed, and where each seed's run folder is."""

    codes: list[int]
    errors: Sequence[str | None]
    staged: Sequence[str | None]  # each seed's run folder in the staging folder (shared storage)
    archives: Sequence[bytes | None]  # each finished seed's run folder as a tar archive (no shared storage)
    node: str
    wall_time_s: float
    resumed_from: str | None = None
    log_tail: str = ""
    final_evals: Sequence[FinalEval | None] = field(default_factory=list)  # rlbench.sweep.final_eval, per seed


def staging_dir(sweep_dir: str | Path, task_id: str) -> Path:
    return Path(sweep_dir) / "staging" / task_id


def log_path(sweep_dir: str | Path, task_id: str) -> Path:
    return Path(sweep_dir) / "logs" / f"{task_id}.log"


def run_task(spec: TaskSpec, board: BoardHandle) -> TaskOutcome:
    """The Ray task: run `spec` and report to `board` (the driver's progress actor) as it goes."""
    start = time.monotonic()
    node = node_name()
    cores = claim_cores(int(spec.packing.cpus_per_run)) if spec.packing.pin else []
    pin_process(cores or ALLOWED_CORES)
    if spec.packing.gpus_per_run > 0:  # Ray sets CUDA_VISIBLE_DEVICES; cap this process's share of the GPU
        os.environ["XLA_PYTHON_CLIENT_MEM_FRACTION"] = f"{min(0.95, 0.95 * spec.packing.gpus_per_run):.3f}"
    if spec.shared_fs:
        staging, log = staging_dir(spec.sweep_dir, spec.task.id), log_path(spec.sweep_dir, spec.task.id)
        log.parent.mkdir(parents=True, exist_ok=True)
    else:
        staging = Path(tempfile.mkdtemp(prefix=f"rlbench-sweep-{spec.task.id}-"))
        log = staging.with_suffix(".log")
    board.started.remote(spec.task.id, node, os.getpid())
    with output_to(log):
        where = f"cores {','.join(map(str, cores))}" if cores else "unpinned"
        if spec.packing.pin and not cores:
            where += " (no free core: more processes than cores on this machine)"
        print(f"=== {spec.task.label}: attempt {spec.attempt} on {node}, pid {os.getpid()}, {where}", flush=True)
        outcome = _run(spec, staging, BoardStop(board, spec.task.id))
    release_cores()  # an idle worker holds no core: the next task may start in another process
    outcome.node = node
    outcome.wall_time_s = time.monotonic() - start
    outcome.log_tail = tail(log)
    text = log.read_text(errors="replace") if log.exists() else ""
    outcome.errors = [
        error if code == 0 or error is not None else seed_error(text, cell.seed, code)
        for cell, code, error in zip(spec.task.cells, outcome.codes, outcome.errors, strict=True)
    ]
    if not spec.shared_fs:
        outcome.archives = [None if path is None else pack(Path(path)) for path in outcome.staged]
        outcome.staged = [None] * len(outcome.staged)
        shutil.rmtree(staging, ignore_errors=True)
        log.unlink(missing_ok=True)
    return outcome


def _run(spec: TaskSpec, staging: Path, board_stop: BoardStop) -> TaskOutcome:
    # JAX is imported here, after the pinning and the GPU share above are in place.
    from rlbench.run import compile_cache
    from rlbench.run.exit_codes import STOPPING_ERRORS, error_text, exit_code
    from rlbench.run.experiment import resolve
    from rlbench.run.launch import Hooks, launch, report

    n = len(spec.task.cells)
    compile_cache.enable(spec.compile_cache)
    request, resumed_from = continue_or_start(spec, staging)
    outputs = dataclasses.replace(spec.outputs, log_folder=str(staging))
    try:
        exp = resolve(request)
    except STOPPING_ERRORS as error:
        code = exit_code(error)
        return TaskOutcome([code] * n, [error_text(error)] * n, [None] * n, [None] * n, "", 0.0, resumed_from)
    progress = ProgressReport(board_stop.board, spec.task.id)
    with SignalStop() as signals:
        hooks = Hooks(
            stop_requested=lambda: signals() or board_stop(),
            on_eval=progress.evaluation,
            on_iteration=progress.iteration,
        )
        launched = launch(exp, outputs, hooks)
        codes = report(exp, launched, spec.outputs.verbose)
    run_dirs = launched.run_dirs
    if not run_dirs:  # the start failed (a full disk): no run folder to report on
        assert launched.error is not None, "a launch with run folders that made none failed"
        errors: list[str | None] = [error_text(launched.error)] * n
        return TaskOutcome(codes, errors, [None] * n, [None] * n, "", 0.0, resumed_from)
    for index, (code, run_dir) in enumerate(zip(codes, run_dirs, strict=True)):
        if code == 0 and exp.resume_seeds:  # a continuation: the earlier attempts' log rows go in front
            keep_history(run_dir, exp.resume_seeds[index], staging)
    finals = final_evaluations(exp, run_dirs, codes) if not signals() and not board_stop() else [None] * n
    errors = [None] * n  # filled from the log by run_task
    staged = [str(run_dir) if code == 0 else None for code, run_dir in zip(codes, run_dirs, strict=True)]
    return TaskOutcome(codes, errors, staged, [None] * n, "", 0.0, resumed_from, final_evals=finals)


def continue_or_start(spec: TaskSpec, staging: Path) -> tuple[RunRequest, str | None]:
    """The task's request in its staging folder: a continuation of the newest valid checkpoint an earlier
    attempt left there (shared storage), else a fresh start in an emptied folder; and the checkpoint."""
    request = dataclasses.replace(spec.request, log_folder=str(staging))
    found = resumable_checkpoint(staging, spec.task.cells[0].algo) if spec.shared_fs else None
    if found is None:
        if staging.exists():
            print(f"=== no checkpoint to continue from in {staging}: starting from scratch", flush=True)
            shutil.rmtree(staging)
        staging.mkdir(parents=True)
        return request, None
    path, steps, target = found
    print(f"=== continuing from checkpoint {path} at {steps} env steps (until {target})", flush=True)
    # No -params and no file: the checkpoint holds the resolved hyperparameters; -n counts the steps to add.
    request = dataclasses.replace(
        request, trained_agent=str(path), n_timesteps=target - steps, params=(), conf_file=None, n_seeds=None
    )
    return request, str(path)


def resumable_checkpoint(staging: Path, algo: str) -> tuple[Path, int, int] | None:
    """The newest valid checkpoint with a replay buffer in the staging folder's run folders, with its env
    steps and the run's target; None when there is none (or the run had already reached its target)."""
    from rlbench.store.checkpoint import CheckpointError, newest_valid_checkpoint, read_checkpoint
    from rlbench.store.expectations import resume_expectations

    found = []
    for run_dir in staging.glob(f"{algo}/*"):
        path = newest_valid_checkpoint(run_dir)
        if path is None:
            continue
        try:
            manifest = read_checkpoint(path, load_replay_buffer=False, expect=resume_expectations).manifest
        except CheckpointError:
            continue
        steps, target = manifest.counters.env_steps, manifest.run.n_timesteps
        if manifest.replay_buffer and steps < target:
            found.append((steps, str(path), target))
    if not found:
        return None
    steps, newest, target = max(found)
    return Path(newest), steps, target


class BoardStop:
    """`stop_requested` for the loop: the driver's stop (Ctrl-C, SIGTERM) through the board, asked at most
    every STOP_POLL_S seconds, the answer collected by a callback (`ObjectRef.future()`). Never `ray.get` or
    `ray.wait` on an answer not yet there: while a task waits in either, even `ray.wait(..., timeout=0)`,
    Ray lends its CPU to another task, and a third run starts on a two-core node (seen on a loaded node:
    four runs on two cores). An unanswered question is asked again later; an unreachable board is not a
    stop, the task goes on."""

    def __init__(self, board: BoardHandle, task_id: str, poll_s: float = STOP_POLL_S) -> None:
        self.board, self.task_id, self.poll_s = board, task_id, poll_s
        self._next_poll = 0.0
        self._pending: Future[str | None] | None = None
        self._reason: str | None = None

    def __call__(self) -> str | None:
        if self._reason is None and time.monotonic() >= self._next_poll:
            self._next_poll = time.monotonic() + self.poll_s
            try:
                if self._pending is None:
                    self._pending = self.board.stop_reason.remote().future()
                elif self._pending.done():
                    self._reason, self._pending = self._pending.result(), None
            except Exception:  # the driver's node is gone: keep training, its checkpoints keep it safe
                self._pending = None
        return self._reason


class ProgressReport:
    """Env steps, env-steps/s and the last evaluation, sent to the board (fire and forget)."""

    def __init__(self, board: BoardHandle, task_id: str) -> None:
        self.board, self.task_id = board, task_id
        self._last = (time.monotonic(), 0)
        self._next = 0.0

    def iteration(self, env_steps: int, state: PyTree) -> None:
        now = time.monotonic()
        if now >= self._next:
            last_time, last_steps = self._last
            rate = (env_steps - last_steps) / (now - last_time) if last_steps else None
            self.board.progress.remote(self.task_id, env_steps, rate, None)
            self._last, self._next = (now, env_steps), now + PROGRESS_EVERY_S

    def evaluation(self, env_steps: int, results: list[EvalResult | None]) -> None:
        means = [result.mean for result in results if result is not None]
        if means:
            self.board.progress.remote(self.task_id, env_steps, None, sum(means) / len(means))


def node_name() -> str:
    import ray

    try:
        node_id = ray.get_runtime_context().get_node_id()[:8]
    except Exception:
        node_id = "?"
    return f"{socket.gethostname()}/{node_id}"


@contextlib.contextmanager
def output_to(path: Path) -> Iterator[None]:
    """Send this process's stdout and stderr (Python's and the C libraries') to `path`, appended."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    with open(path, "ab") as log:
        os.dup2(log.fileno(), 1)
        os.dup2(log.fileno(), 2)
    try:
        yield
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        os.close(saved[0])
        os.close(saved[1])


def tail(path: Path, lines: int = 40) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


def seed_error(log_text: str, seed: int, code: int) -> str:
    """Why a seed did not finish, as its run printed it: its divergence note, else the last `error:` line."""
    if code in (75, 130):
        return "stopped (checkpoint written)" if code == 75 else "aborted without a checkpoint"
    lines = log_text.splitlines()
    for line in reversed(lines):
        match = re.match(rf"\s+seed {seed} \(.*?\): (.*)$", line)
        if match:
            return f"diverged: {match.group(1)}"
    for line in reversed(lines):
        if line.startswith("error:"):
            return line.removeprefix("error:").strip()
    if any(line.startswith("Traceback") for line in lines):  # an exception in rlbench: its last line
        return next((line.strip() for line in reversed(lines) if line.strip()), f"exit {code}")
    return f"exit {code}"


def pack(folder: Path) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz", compresslevel=1) as archive:
        archive.add(folder, arcname=folder.name)
    return buffer.getvalue()


def unpack(data: bytes, into: Path) -> Path:
    """Extract a `pack` archive into the folder `into` (which must not exist). The archive is untrusted: only
    plain files and folders below its one top folder, checked here (tarfile's "data" filter, where this
    Python has it, checks the same again)."""
    staging = Path(tempfile.mkdtemp(prefix=".unpack-", dir=into.parent))
    try:
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as archive:
            members = archive.getmembers()
            tops = {PurePosixPath(member.name).parts[0] for member in members if member.name}
            if len(tops) != 1 or not re.fullmatch(r"[A-Za-z0-9._-]+", next(iter(tops))):
                raise ValueError("not one run folder")
            for member in members:
                parts = PurePosixPath(member.name).parts
                if member.name.startswith("/") or ".." in parts or not (member.isfile() or member.isdir()):
                    raise ValueError(f"{member.name!r} is not a plain file or folder inside the run folder")
            if hasattr(tarfile, "data_filter"):  # Python 3.11.4+
                archive.extractall(staging, members=members, filter="data")
            else:
                archive.extractall(staging, members=members)
        os.rename(staging / next(iter(tops)), into)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return into


class SignalStop(SignalScope):
    """SIGINT/SIGTERM sent to the worker itself (a terminal's Ctrl-C reaching the whole process group, or
    a scheduler): stop at the next env step with a checkpoint, as train.py does."""

    def __init__(self) -> None:
        self.reason: str | None = None

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        self.reason = signal.Signals(signum).name

    def __call__(self) -> str | None:
        return self.reason
