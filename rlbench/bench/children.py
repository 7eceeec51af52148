"""The benchmark's child processes (its rows, each in a fresh interpreter, and the SBX peer), none left behind.

Each child starts in a session, hence a process group, of its own, and is registered while it runs. When the
benchmark is stopped (SIGTERM, SIGINT) or leaves `stopping_children()` in any way, every registered group
is killed: a stopped benchmark leaves no peer training on as an orphan, nor anything the peer started itself.
Its own group also keeps the terminal's Ctrl-C from reaching the children directly: the benchmark stops them.
A benchmark killed outright (SIGKILL, the OOM killer) runs no handler: there the kernel kills each child
(PR_SET_PDEATHSIG, set by a few lines of this Python that then exec the child, so it holds for any program),
as the tuning workers die with their parent.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from types import FrameType
from typing import Any, ClassVar

from rlbench.run.signals import SignalScope

# One benchmark case or row: a JSON object (its keys and values vary with the row kind).
Row = dict[str, Any]

PR_SET_PDEATHSIG = 1  # from <linux/prctl.h>
# Run ahead of each child, in the child's process (`sys.executable -I -S -c WITH_PARENT PARENT_PID COMMAND...`):
# the kernel is asked to SIGKILL it when the benchmark dies, a setting execvp keeps, and a benchmark already
# dead before that (the child reparented) is seen in the parent pid; then it becomes the command (same pid,
# hence the same process group). A command that cannot start exits 127, as a shell's, with the reason.
WITH_PARENT = f"""
import ctypes, os, signal, sys
parent, *command = sys.argv[1:]
if sys.platform.startswith("linux"):
    ctypes.CDLL(None, use_errno=True).prctl({PR_SET_PDEATHSIG}, signal.SIGKILL)
if os.getppid() != int(parent):
    sys.exit(128 + signal.SIGKILL)
try:
    os.execvp(command[0], command)
except OSError as error:
    print(f"cannot start {{command[0]}}: {{error.strerror or error}}", file=sys.stderr)
    sys.exit(127)
"""


class ChildrenStopped(SystemExit):
    """A stop signal inside `stopping_children()`, once every child is killed: the process exits 128 + the
    signal (as the signal's default action would have) unless its caller turns it into another code."""

    def __init__(self, signum: int) -> None:
        super().__init__(128 + signum)
        self.signum = signum


class _Children:
    running: ClassVar[set[subprocess.Popen[str]]] = set()
    spawning = False  # between fork and registration: a signal waits (the child would not be known yet)
    pending: int | None = None


def start_child(
    command: Sequence[str], env: dict[str, str] | None = None, output: Path | None = None, cwd: Path | None = None
) -> subprocess.Popen[str]:
    """Popen in a new process group, killed by the kernel if this process dies, registered until
    `finish_child`; its output captured as text, or with `output` appended to that file (a child that runs
    for hours while others are polled fills no pipe); in `cwd` when given."""
    _Children.spawning = True
    try:
        with open(output, "ab") if output is not None else contextlib.nullcontext() as log:
            pipe = subprocess.PIPE if log is None else log
            process = subprocess.Popen(
                [sys.executable, "-I", "-S", "-c", WITH_PARENT, str(os.getpid()), *command],
                stdout=pipe,
                stderr=subprocess.PIPE if log is None else subprocess.STDOUT,
                text=True,
                env=env,
                cwd=cwd,
                start_new_session=True,
            )
        _Children.running.add(process)
    finally:
        _Children.spawning = False
    if _Children.pending is not None:
        _stop(_Children.pending)
    return process


def finish_child(process: subprocess.Popen[str]) -> subprocess.CompletedProcess[str]:
    stdout, stderr = process.communicate()
    _Children.running.discard(process)
    return subprocess.CompletedProcess(process.args, process.returncode, stdout, stderr)


def run_child(command: Sequence[str], env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """subprocess.run(command, capture_output=True, text=True), in a process group that a stop kills."""
    return finish_child(start_child(command, env))


def kill_children() -> None:
    for process in list(_Children.running):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signal.SIGKILL)  # a new session's group id is its leader's pid
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=5)
        _Children.running.discard(process)


def _stop(signum: int) -> None:
    _Children.pending = None
    kill_children()
    raise ChildrenStopped(signum)


class _StopKillsChildren(SignalScope):
    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if _Children.spawning:
            _Children.pending = signum
            return
        _stop(signum)


@contextlib.contextmanager
def stopping_children() -> Iterator[None]:
    """SIGTERM or SIGINT inside: kill every child's group, then raise ChildrenStopped; any exit: kill them."""
    with _StopKillsChildren():
        try:
            yield
        finally:
            kill_children()


def rlbench_row_in_subprocess(case: Row, device: str) -> Row:
    """One row in a fresh interpreter: its compile time and peak memory are not shared with other rows."""
    command = [sys.executable, "-m", "rlbench.bench", "speed", "--device", device, "--one-row", json.dumps(case)]
    return row_from(run_child(command), {"system": "rlbench", **case})


def row_from(done: subprocess.CompletedProcess[str], case: Row) -> Row:
    """The JSON row a benchmark process printed last; for one that failed, the case with the end of its
    error output, so that one failing row does not cost the others (a GPU session has one try)."""
    if done.returncode == 0:
        return json.loads(done.stdout.strip().splitlines()[-1])
    return {**case, "error": f"exit {done.returncode}: " + " | ".join(done.stderr.strip().splitlines()[-3:])}
