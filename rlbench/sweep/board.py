"""The board of task events: a Ray actor on the driver's node that the tasks report to (started, progress),
that the driver polls, and that carries the driver's stop to every task.

Its own module because it is the one piece that both sides touch: a task on a worker (rlbench.sweep.cell)
calls it, the driver (rlbench.sweep.scheduler) creates and drains it.
"""

from __future__ import annotations

from typing import Any


class Board:
    """Events, in the order they came, until the driver drains them; the driver's stop, once asked."""

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
