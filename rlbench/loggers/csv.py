"""progress.csv: one row per log interval, a fixed header of every metric the run can report."""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Mapping, Sequence
from pathlib import Path

from rlbench.files import atomic_write_text
from rlbench.loggers.base import STEP_KEY


class CSVLogger:
    """The header is written atomically (a full disk never leaves an empty progress.csv), rows are
    appended and flushed one by one; a failed write names the file."""

    def __init__(self, path: Path, metric_names: Sequence[str]):
        self.path = Path(path)
        self.columns = [STEP_KEY, *sorted(set(metric_names) - {STEP_KEY})]
        header = io.StringIO()
        csv.DictWriter(header, fieldnames=self.columns).writeheader()
        atomic_write_text(self.path, header.getvalue())
        self.file = self.path.open("a", newline="")
        self.writer = csv.DictWriter(self.file, fieldnames=self.columns, extrasaction="raise")

    def log(self, metrics: Mapping[str, float], step: int) -> None:
        row: dict[str, str | float] = {name: "" for name in self.columns}
        row[STEP_KEY] = step
        for name, value in metrics.items():
            if name not in row:
                raise KeyError(f"metric {name!r} is not a column of progress.csv")
            row[name] = "" if isinstance(value, float) and math.isnan(value) else value
        try:
            self.writer.writerow(row)
            self.file.flush()
        except OSError as error:
            raise OSError(error.errno, f"could not write {self.path}: {error.strerror or error}") from None

    def close(self) -> None:
        self.file.close()
