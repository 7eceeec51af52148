"""The benchmark's child processes (its rows, each in a fresh interpreter, and the SBX peer), none left behind.

Each child starts in a session, hence a process group, of its own, and is registered while it runs. When the
benchmark is stopped (SIGTERM, SIGINT) or leaves `stopping_children()` in any way, every registered group
is killed: a stopped benchmark leaves no peer training on as an orphan, nor anything the peer started itself.
Its own group also keeps the terminal's Ctrl-C from reaching the children directly: the benchmark stops them.
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
from typing import Any, ClassVar

from rlbench.run.signals import SignalScope


class _Children:
    running: ClassVar[set[subprocess.Popen]] = set()
    spawning = False  # between fork and registration: a signal waits (the child would not be known yet)
    pending: int | None = None


def start_child(
    command: Sequence[str], env: dict[str, str] | None = None, output: Path | None = None
) -> subprocess.Popen:
    """Popen in a new process group, registered until `finish_child`; its output captured as text, or with
    `output` appended to that file (a child that runs for hours while others are polled fills no pipe)."""
    _Children.spawning = True
    try:
        with open(output, "ab") if output is not None else contextlib.nullcontext() as log:
            pipe = subprocess.PIPE if log is None else log
            process = subprocess.Popen(
                command,
                stdout=pipe,
                stderr=subprocess.PIPE if log is None else subprocess.STDOUT,
                text=True,
                env=env,
                start_new_session=True,
            )
        _Children.running.add(process)
    finally:
        _Children.spawning = False
    if _Children.pending is not None:
        _stop(_Children.pending)
    return process


def finish_child(process: subprocess.Popen) -> subprocess.CompletedProcess:
    stdout, stderr = process.communicate()
    _Children.running.discard(process)
    return subprocess.CompletedProcess(process.args, process.returncode, stdout, stderr)


def run_child(command: Sequence[str], env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
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
    raise SystemExit(128 + signum)  # as the signal's default action would have ended the benchmark


class _StopKillsChildren(SignalScope):
    def _handle(self, signum: int, frame: Any) -> None:
        if _Children.spawning:
            _Children.pending = signum
            return
        _stop(signum)


@contextlib.contextmanager
def stopping_children() -> Iterator[None]:
    """SIGTERM or SIGINT inside: kill every child's group, then exit 128 + the signal; any exit: kill them."""
    with _StopKillsChildren():
        try:
            yield
        finally:
            kill_children()


def rlbench_row_in_subprocess(case: dict, device: str) -> dict:
    """One row in a fresh interpreter: its compile time and peak memory are not shared with other rows."""
    command = [sys.executable, "-m", "rlbench.bench", "speed", "--device", device, "--one-row", json.dumps(case)]
    return row_from(run_child(command), {"system": "rlbench", **case})


def row_from(done: subprocess.CompletedProcess, case: dict) -> dict:
    """The JSON row a benchmark process printed last; for one that failed, the case with the end of its
    error output, so that one failing row does not cost the others (a GPU session has one try)."""
    if done.returncode == 0:
        return json.loads(done.stdout.strip().splitlines()[-1])
    return {**case, "error": f"exit {done.returncode}: " + " | ".join(done.stderr.strip().splitlines()[-3:])}
