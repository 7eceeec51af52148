"""The sweep's live view: a rich table of its processes on a terminal, one line per event elsewhere."""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass

from rich.console import Console
from rich.live import Live
from rich.table import Table

from rlbench.sweep.grid import Task
from rlbench.sweep.manifest import Manifest


@dataclass
class TaskView:
    task: Task
    state: str = "pending"
    node: str = ""
    attempts: int = 0
    env_steps: int = 0
    rate: float | None = None
    last_eval: float | None = None


class Progress:
    """Events are printed as lines; on a terminal a table of the running and recent processes is redrawn
    below them (rich.Live), with the cell counts of the whole sweep as its title."""

    def __init__(self, manifest: Manifest, tasks: list[Task], live: bool | None = None) -> None:
        self.manifest = manifest
        self.views = {task.id: TaskView(task) for task in tasks}
        self.console = Console()
        self.live = (
            Live(self._table(), console=self.console, auto_refresh=False)
            if (sys.stdout.isatty() if live is None else live)
            else None
        )
        self._last_refresh = 0.0

    def __enter__(self) -> Progress:
        if self.live is not None:
            self.live.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.live is not None:
            self.live.update(self._table(), refresh=True)
            self.live.stop()

    def event(self, text: str) -> None:
        if self.live is not None:
            self.live.console.print(text, highlight=False, markup=False)
        else:
            print(text, flush=True)
        self.refresh(force=True)

    def refresh(self, force: bool = False) -> None:
        if self.live is not None and (force or time.monotonic() - self._last_refresh > 1.0):
            self.live.update(self._table(), refresh=True)
            self._last_refresh = time.monotonic()

    def summary(self) -> str:
        counts = self.manifest.counts()
        return ", ".join(f"{n} {state}" for state, n in counts.items() if n)

    def _table(self) -> Table:
        table = Table(title=f"sweep {self.manifest.name}: {self.summary()}", title_justify="left")
        for column in ("process", "state", "node"):
            table.add_column(column)
        for column in ("tries", "env steps", "steps/s", "last eval"):
            table.add_column(column, justify="right")
        shown = [view for view in self.views.values() if view.state in ("running", "retrying")]
        shown += [view for view in self.views.values() if view.state not in ("running", "retrying", "pending")][-8:]
        for view in shown:
            table.add_row(
                view.task.label,
                view.state,
                view.node,
                str(view.attempts),
                str(view.env_steps or ""),
                "" if view.rate is None else f"{view.rate:.0f}",
                "" if view.last_eval is None else f"{view.last_eval:.1f}",
            )
        pending = sum(view.state == "pending" for view in self.views.values())
        if pending:
            table.caption = f"{pending} processes waiting for a free slot"
        return table
