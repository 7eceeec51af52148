"""Stop requests from SIGINT and SIGTERM (a user's Ctrl-C, a scheduler's preemption notice), as a context
manager that installs its handler for the block and restores the previous ones after it. train.py's
`GracefulStop` (train.py, the sweep's driver) and the tuning processes' `StopSignal` say what a stop means to each."""

from __future__ import annotations

import contextlib
import signal
import sys
from collections.abc import Iterator
from types import FrameType
from typing import Self

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


class SignalScope:
    """Calls `self._handle(signum, frame)` on SIGINT and SIGTERM inside the `with` block."""

    def __enter__(self) -> Self:
        self._previous = {signum: signal.signal(signum, self._handle) for signum in STOP_SIGNALS}
        return self

    def __exit__(self, *exc: object) -> None:
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        raise NotImplementedError


class StartInterrupted(BaseException):
    """A stop signal while a run was starting (not an Exception: no `except Exception` swallows it). Raised
    at once, so that the start removes what it created on its way out; the process then exits 128 + the
    signal's number, as the signal's default action would have."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


class _Deferral:
    depth = 0
    pending: int | None = None


@contextlib.contextmanager
def start_step() -> Iterator[None]:
    """A step of a start that a signal must not cut in two (a folder created, and recorded for removal): the
    StartInterrupted of a signal that arrives inside it is raised when it ends. (Blocking the signal would
    not do: another thread may take it, and Python runs the handler in this one at its next bytecode.)"""
    _Deferral.depth += 1
    try:
        yield
    finally:
        _Deferral.depth -= 1
    if _Deferral.depth == 0 and _Deferral.pending is not None:
        signum, _Deferral.pending = _Deferral.pending, None
        raise StartInterrupted(signum)


class GracefulStop(SignalScope):
    """The first SIGINT or SIGTERM sets `reason` (the signal's name) and prints `announce`; the caller polls
    it (`stop()`) and stops cleanly, e.g. after a checkpoint. A second SIGINT aborts at once
    (KeyboardInterrupt), for a user who does not want to wait.

    `starting=True`: until `started()`, there is nothing to checkpoint, so the first signal raises
    StartInterrupted instead, and later ones are ignored (they must not cut short the cleanup it starts)."""

    def __init__(self, announce: str, starting: bool = False) -> None:
        self.announce = announce
        self.reason: str | None = None
        self.starting = starting

    def started(self) -> None:
        """Training begins: from now on a signal asks for a checkpoint and a clean stop."""
        self.starting = False

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if self.starting:
            if self.reason is None:
                self.reason = signal.Signals(signum).name
                if _Deferral.depth:
                    _Deferral.pending = signum
                    return
                raise StartInterrupted(signum)
            return
        if self.reason is not None and signum == signal.SIGINT:
            raise KeyboardInterrupt
        self.reason = signal.Signals(signum).name
        print(f"\n{self.reason} received: {self.announce}", file=sys.stderr, flush=True)

    def __call__(self) -> str | None:
        return self.reason
