"""TensorBoard event files through tensorboardX (no TensorFlow, no torch): the same scalars as
progress.csv, with env steps as the step axis."""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from rlbench.errors import ConfigError


def import_tensorboardx() -> Any:
    try:
        import tensorboardX
    except ImportError:
        raise ConfigError('-tb/--tensorboard-log needs tensorboardX: pip install -e ".[tracking]"') from None
    return tensorboardX


class TensorBoardLogger:
    def __init__(self, log_dir: Path):
        self.log_dir = Path(log_dir)
        self.writer = import_tensorboardx().SummaryWriter(logdir=str(self.log_dir), flush_secs=10)

    def log(self, metrics: Mapping[str, float], step: int) -> None:
        for name, value in metrics.items():
            if not (isinstance(value, float) and math.isnan(value)):
                self.writer.add_scalar(name, float(value), global_step=step)

    def close(self) -> None:
        self.writer.close()
