"""Harmless markers for the security tests: each leaves a file behind if it is ever called or imported.

The tests name these from files rlbench reads back (config.yml, a checkpoint's manifest) and check the
file never appears. `MARKER_DIR` comes from the environment so subprocesses mark the test's tmp_path.
"""

from __future__ import annotations

import os
from pathlib import Path

import gymnasium as gym


def _mark(name: str) -> None:
    folder = os.environ.get("RLBENCH_TEST_MARKER_DIR")
    if folder:
        Path(folder, name).touch()


_mark("imported")  # importing this module is itself a side effect a read-back file must not cause


def touch_marker(env, **kwargs):
    """A callable that is not a wrapper class: env_wrapper must refuse it even from a trusted module."""
    _mark("called")
    return env


class ScaleReward(gym.RewardWrapper):
    """A legitimate wrapper, for the positive case (`--trust-wrappers tests.marker_wrappers`)."""

    def __init__(self, env, scale: float = 1.0):
        super().__init__(env)
        self.scale = scale

    def reward(self, reward):
        return self.scale * reward
