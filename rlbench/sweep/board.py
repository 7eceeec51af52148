"""The board of task events: a Ray actor on the driver's node that the tasks report to (started, progress),
that the driver polls, and that carries the driver's stop to every task.

Its own module because it is the one piece that both sides touch: a task on a worker (rlbench.sweep.cell)
calls it, the driver (rlbench.sweep.scheduler) creates and drains it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal, ParamSpec, Protocol, TypeVar

if TYPE_CHECKING:
    from ray import ObjectRef

# (kind, task id, node, pid)
Started = tuple[Literal["started"], str, str, int]
# (kind, task id, env steps, env-steps/s or None, last evaluation's mean return or None)
Progressed = tuple[Literal["progress"], str, int, float | None, float | None]
BoardEvent = Started | Progressed

P = ParamSpec("P")
R = TypeVar("R")


class RemoteMethod(Protocol[P, R]):
    """A method of a Ray actor handle: `.remote(...)` calls it on the actor, for an object ref to its result."""

    def remote(self, *args: P.args, **kwargs: P.kwargs) -> ObjectRef[R]: ...


class BoardHandle(Protocol):
    """The Board as the tasks and the driver hold it: a Ray actor handle (`ray.remote(Board)...remote()`)."""

    @property
    def stop_reason(self) -> RemoteMethod[[], str | None]: ...

    @property
    def request_stop(self) -> RemoteMethod[[str], None]: ...

    @property
    def started(self) -> RemoteMethod[[str, str, int], None]: ...

    @property
    def progress(self) -> RemoteMethod[[str, int, float | None, float | None], None]: ...

    @property
    def drain(self) -> RemoteMethod[[], list[BoardEvent]]: ...


class Board:
    """Events, in the order they came, until the driver drains them; the driver's stop, once asked."""

    def __init__(self) -> None:
        self._stop: str | None = None
        self._events: list[BoardEvent] = []

    def stop_reason(self) -> str | None:
        return self._stop

    def request_stop(self, reason: str) -> None:
        self._stop = reason

    def started(self, task_id: str, node: str, pid: int) -> None:
        self._events.append(("started", task_id, node, pid))

    def progress(self, task_id: str, env_steps: int, rate: float | None, last_eval: float | None) -> None:
        self._events.append(("progress", task_id, env_steps, rate, last_eval))

    def drain(self) -> list[BoardEvent]:
        events, self._events = self._events, []
        return events
