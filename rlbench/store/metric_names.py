"""The metric names of earlier rlbench versions, and SB3's names that replaced them: a checkpoint's manifest
or a progress.csv written before the rename is read under today's names."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TypeVar

V = TypeVar("V")

# rlbench's names before it took SB3's (README "Metrics").
RENAMED_METRICS = {
    "time/env_steps": "time/total_timesteps",
    "train/alpha": "train/ent_coef",
    "train/temperature_loss": "train/ent_coef_loss",
}


def current_names(metrics: Mapping[str, V]) -> dict[str, V]:
    """`metrics` with each earlier name replaced by today's (a name that has both keeps today's value)."""
    renamed = {RENAMED_METRICS.get(name, name): value for name, value in metrics.items() if name in RENAMED_METRICS}
    return renamed | {name: value for name, value in metrics.items() if name not in RENAMED_METRICS}
