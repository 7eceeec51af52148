"""The Logger protocol and a fan-out to several loggers."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol

# Every row's x axis, in every logger: the env steps so far, under SB3's name for them.
STEP_KEY = "time/total_timesteps"


class Logger(Protocol):
    def log(self, metrics: Mapping[str, float], step: int) -> None: ...

    def close(self) -> None: ...


class MultiLogger:
    def __init__(self, loggers: Sequence[Logger]):
        self.loggers = list(loggers)

    def log(self, metrics: Mapping[str, float], step: int) -> None:
        for logger in self.loggers:
            logger.log(metrics, step)

    def close(self) -> None:
        for logger in self.loggers:
            logger.close()
