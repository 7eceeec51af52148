"""SB3 Monitor files, which RL Zoo's `plot_train` reads: `<index>.monitor.csv` per training env.

Each file starts with `#{"t_start": <unix time>, "env_id": "<id>"}`, then the header `r,l,t`, then one
row per finished episode: its return (rounded to 6 digits), its length, and the seconds since
t_start. The rows are written by csv's DictWriter ("\\r\\n" line ends) exactly as SB3's Monitor
writes them, and flushed at once, so a crash keeps every episode that finished.
"""

from __future__ import annotations

import csv
import json
import time
from pathlib import Path


class MonitorFiles:
    def __init__(self, run_dir: Path, n_envs: int, env_id: str):
        self.t_start = time.time()
        # SB3 writes env.spec.id: the id without the `module:` prefix gymnasium imports it from.
        header = "#" + json.dumps({"t_start": self.t_start, "env_id": env_id.rpartition(":")[2]}) + "\n"
        self.files = [(run_dir / f"{i}.monitor.csv").open("w", newline="") for i in range(n_envs)]
        self.writers = [csv.DictWriter(file, fieldnames=("r", "l", "t")) for file in self.files]
        for file, writer in zip(self.files, self.writers, strict=True):
            file.write(header)
            writer.writeheader()
            file.flush()

    def episode(self, env_index: int, episode_return: float, length: int) -> None:
        self.writers[env_index].writerow(
            {"r": round(float(episode_return), 6), "l": int(length), "t": round(time.time() - self.t_start, 6)}
        )
        self.files[env_index].flush()

    def close(self) -> None:
        for file in self.files:
            file.close()
