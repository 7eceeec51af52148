"""Stable-Baselines3's Monitor file, which RL Zoo's plotting scripts read: `<index>.monitor.csv` per env,
a `#{"t_start": ..., "env_id": ...}` JSON line, then `r,l,t` (return, length, seconds since t_start) per
finished episode, flushed as each episode ends."""

from __future__ import annotations

import json
import time
from pathlib import Path


class MonitorFile:
    def __init__(self, folder: Path, index: int, env_id: str) -> None:
        self.path = Path(folder) / f"{index}.monitor.csv"
        self.t_start = time.time()
        self.file = open(self.path, "w", newline="\n")  # noqa: SIM115 (closed by close(), episodes arrive over time)
        self.file.write(f"#{json.dumps({'t_start': self.t_start, 'env_id': env_id})}\nr,l,t\n")
        self.file.flush()

    def episode(self, episode_return: float, length: int) -> None:
        self.file.write(f"{round(episode_return, 6)},{length},{round(time.time() - self.t_start, 6)}\n")
        self.file.flush()

    def close(self) -> None:
        self.file.close()
