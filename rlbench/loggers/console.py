"""A compact table of the latest metrics on stdout, SB3 style."""

from __future__ import annotations

import math
from collections.abc import Mapping

from rlbench.loggers.base import STEP_KEY


class ConsoleLogger:
    def log(self, metrics: Mapping[str, float], step: int) -> None:
        rows = [
            (name, value)
            for name, value in sorted(metrics.items())
            if name != STEP_KEY and not (isinstance(value, float) and math.isnan(value))
        ]
        rows.insert(0, (STEP_KEY, step))
        width = max(len(name) for name, _ in rows)
        lines = [f"| {name:<{width}} | {_fmt(value):>12} |" for name, value in rows]
        rule = "-" * len(lines[0])
        print("\n".join([rule, *lines, rule]), flush=True)

    def close(self) -> None:
        pass


def _fmt(value: float) -> str:
    if isinstance(value, int) or (isinstance(value, float) and value.is_integer() and abs(value) < 1e9):
        return str(int(value))
    return f"{value:.4g}" if math.isfinite(value) else str(value)
