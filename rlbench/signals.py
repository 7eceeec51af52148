"""Stop requests from SIGINT and SIGTERM (a user's Ctrl-C, a scheduler's preemption notice), as a context
manager that installs its handler for the block and restores the previous ones after it. train.py's
`GracefulStop` (train.py, the sweep's driver) and the tuning processes' `StopSignal` say what a stop means to each."""

from __future__ import annotations

import signal
import sys
from typing import Any

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


class SignalScope:
    """Calls `self._handle(signum, frame)` on SIGINT and SIGTERM inside the `with` block."""

    def __enter__(self) -> Any:
        self._previous = {signum: signal.signal(signum, self._handle) for signum in STOP_SIGNALS}
        return self

    def __exit__(self, *exc: object) -> None:
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)

    def _handle(self, signum: int, frame: Any) -> None:
        raise NotImplementedError


class GracefulStop(SignalScope):
    """The first SIGINT or SIGTERM sets `reason` (the signal's name) and prints `announce`; the caller polls
    it (`stop()`) and stops cleanly, e.g. after a checkpoint. A second SIGINT aborts at once
    (KeyboardInterrupt), for a user who does not want to wait."""

    def __init__(self, announce: str) -> None:
        self.announce = announce
        self.reason: str | None = None

    def _handle(self, signum: int, frame: Any) -> None:
        if self.reason is not None and signum == signal.SIGINT:
            raise KeyboardInterrupt
        self.reason = signal.Signals(signum).name
        print(f"\n{self.reason} received: {self.announce}", file=sys.stderr, flush=True)

    def __call__(self) -> str | None:
        return self.reason
