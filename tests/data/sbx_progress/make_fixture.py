"""Writes tests/data/sbx_progress/<algo>.csv: the head of a real SBX run's progress.csv (SB3's CSV logger),
the keys rlbench's progress.csv must hold too (tests/integration/test_metric_keys.py).

Run with the peer's Python (SBX + SB3), not rlbench's:
    JAX_PLATFORMS=cpu /work/peer-venv/bin/python tests/data/sbx_progress/make_fixture.py
RL Zoo's train.py writes no progress.csv (its logger is stdout, plus TensorBoard with -tb), so the run is
made here as RL Zoo makes it (the algorithm, an EvalCallback, learn with log_interval) with SB3's CSV
format added."""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import gymnasium as gym
import sbx
import stable_baselines3
from stable_baselines3.common.callbacks import EvalCallback
from stable_baselines3.common.logger import configure

HERE = Path(__file__).parent
KEPT_ROWS = 3


def main() -> None:
    for name in ("SAC", "TQC", "CrossQ"):
        with tempfile.TemporaryDirectory() as folder:
            model = getattr(sbx, name)(
                "MlpPolicy", "Pendulum-v1", learning_starts=100, policy_kwargs={"net_arch": [32, 32]}, seed=0
            )
            model.set_logger(configure(folder, ["csv"]))
            evaluation = EvalCallback(gym.make("Pendulum-v1"), eval_freq=500, n_eval_episodes=2, verbose=0)
            model.learn(1000, callback=evaluation, log_interval=1)
            lines = (Path(folder) / "progress.csv").read_text().splitlines()
        (HERE / f"{name.lower()}.csv").write_text("\n".join(lines[: 1 + KEPT_ROWS]) + "\n")
    versions = f"sbx {sbx.__version__}, stable_baselines3 {stable_baselines3.__version__}, gymnasium {gym.__version__}"
    print(f"written with {versions}, Python {sys.version.split()[0]}")


if __name__ == "__main__":
    main()
