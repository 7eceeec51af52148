"""progress.csv: one row per log interval, a fixed header of every metric the run can report."""

from __future__ import annotations

import csv
import math
from collections.abc import Mapping, Sequence
from pathlib import Path


class CSVLogger:
    def __init__(self, path: Path, metric_names: Sequence[str]):
        self.columns = ["time/env_steps", *sorted(set(metric_names) - {"time/env_steps"})]
        self.file = path.open("w", newline="")
        self.writer = csv.DictWriter(self.file, fieldnames=self.columns, extrasaction="raise")
        self.writer.writeheader()
        self.file.flush()

    def log(self, metrics: Mapping[str, float], step: int) -> None:
        row = {name: "" for name in self.columns}
        row["time/env_steps"] = step
        for name, value in metrics.items():
            if name not in row:
                raise KeyError(f"metric {name!r} is not a column of progress.csv")
            row[name] = "" if isinstance(value, float) and math.isnan(value) else value
        self.writer.writerow(row)
        self.file.flush()

    def close(self) -> None:
        self.file.close()
