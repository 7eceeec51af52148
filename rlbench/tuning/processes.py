"""The processes of a tuning run: stop requests (SIGINT, SIGTERM) shared by the main process and its
workers, waiting for the workers, workers that never outlive the main process, and what each prints of a
failed trial."""

from __future__ import annotations

import ctypes
import logging
import multiprocessing
import multiprocessing.synchronize
import os
import signal
import socket
import sys
import threading
import time
from collections.abc import Sequence
from multiprocessing.process import BaseProcess
from types import FrameType

import optuna

from rlbench.run.signals import SignalScope
from rlbench.tuning.study import fail_running_trials

EXIT_INTERRUPTED = 75
STOP_GRACE_S = 20  # after a stop request, how long a worker may take to end its trial before it is killed
PR_SET_PDEATHSIG = 1  # from <linux/prctl.h>


def worker_id(pid: int | None = None) -> str:
    """What a trial's `worker` attribute holds: host:pid."""
    return f"{socket.gethostname()}:{pid or os.getpid()}"


class StopSignal(SignalScope):
    """SIGINT and SIGTERM ask the running trial to stop at its next env step (it ends FAIL) and no new
    trial to start. The main process passes the request on to its workers through `event`, which a worker
    reads even if the signal came before its own handler was installed, or went to the main process alone."""

    def __init__(self, event: multiprocessing.synchronize.Event, announce: bool = False) -> None:
        self.event, self.announce = event, announce
        self.reason: str | None = None

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if self.announce and self.reason is None:
            print(
                f"\n{signal.Signals(signum).name} received: the running trials stop and end as FAIL, then the "
                "report is written",
                file=sys.stderr,
                flush=True,
            )
        self.request(signal.Signals(signum).name)

    def request(self, reason: str) -> None:
        self.reason = self.reason or reason
        self.event.set()

    def __call__(self) -> str | None:
        if self.reason is None and self.event.is_set():
            self.reason = "stop requested by the main process"
        return self.reason


def join_workers(workers: Sequence[BaseProcess], study: optuna.Study, stop: StopSignal) -> bool:
    """Wait for every worker. Once a stop was requested each has STOP_GRACE_S to end its trial; one still
    running then is killed and its RUNNING trials marked FAIL. True when a worker was interrupted."""
    deadline = None
    for worker in workers:
        while worker.is_alive():
            worker.join(timeout=0.5)
            if stop() and deadline is None:
                deadline = time.monotonic() + STOP_GRACE_S
            if deadline is not None and time.monotonic() > deadline and worker.is_alive():
                worker.kill()
                worker.join()
                failed = fail_running_trials(study, worker_id(worker.pid))
                print(
                    f"Worker {worker.pid} did not stop within {STOP_GRACE_S} s: killed; its trials {failed} FAIL",
                    file=sys.stderr,
                )
    return any(worker.exitcode == EXIT_INTERRUPTED for worker in workers)


def exit_with_parent(parent_pid: int) -> None:
    """A worker never outlives the process that started it, even one killed with SIGKILL. On Linux the
    kernel kills it when the parent dies (PR_SET_PDEATHSIG); everywhere, a thread checks every second that
    its parent is still `parent_pid`, which also catches a parent that died before the prctl call."""
    if sys.platform.startswith("linux"):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    threading.Thread(target=_exit_when_orphaned, args=(parent_pid,), name="parent-watch", daemon=True).start()


def _exit_when_orphaned(parent_pid: int) -> None:
    while os.getppid() == parent_pid:
        time.sleep(1)
    os._exit(1)


class OneLineFailures(logging.Filter):
    """Optuna logs a trial that raised with the exception's traceback. For the failures a trial is expected
    to have (`expected`: a stop request, a divergence, a bad value), whose message says it all, the line
    alone; and "Trial N failed with value None.", which follows every failure logged with its error and
    adds nothing, is dropped."""

    def __init__(self, expected: tuple[type[BaseException], ...]) -> None:
        super().__init__()
        self.expected = expected

    def filter(self, record: logging.LogRecord) -> bool:
        if record.exc_info and isinstance(record.exc_info[1], self.expected):
            record.exc_info = record.exc_text = None
        return not record.getMessage().endswith(" failed with value None.")


def failures_in_one_line(expected: tuple[type[BaseException], ...]) -> None:
    """Filter Optuna's log handlers in this process (once) with OneLineFailures(expected)."""
    for handler in logging.getLogger("optuna").handlers:
        if not any(isinstance(existing, OneLineFailures) for existing in handler.filters):
            handler.addFilter(OneLineFailures(expected))
