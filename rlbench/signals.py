"""Stop requests from SIGINT and SIGTERM (a user's Ctrl-C, a scheduler's preemption notice), as a context
manager that installs its handler for the block and restores the previous ones after it. train.py's
`StopRequest` and the tuning processes' `StopSignal` say what a stop means to each."""

from __future__ import annotations

import signal
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
