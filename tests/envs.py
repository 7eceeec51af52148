"""Small deterministic environments for testing the loop's episode semantics (RELIABILITY fixtures).

Registered on import; use them as `tests.envs:<id>` so subprocess workers import this module too.
"""

from __future__ import annotations

import os
import signal

import gymnasium as gym
import numpy as np


class CountingEnv(gym.Env):
    """Reward `reward` (1) each step. Observation: the step index, or a constant 1.0 with `constant_obs`.

    `terminate_at=k` ends the episode with terminated=True at step k (no time limit implied).
    """

    def __init__(
        self, terminate_at: int | None = None, constant_obs: bool = False, reward: float = 1.0, action_high: float = 2.0
    ):
        self.observation_space = gym.spaces.Box(-np.inf, np.inf, (1,), np.float32)
        self.action_space = gym.spaces.Box(-action_high, action_high, (1,), np.float32)
        self.terminate_at = terminate_at
        self.constant_obs = constant_obs
        self.reward = reward
        self.t = 0

    def _obs(self) -> np.ndarray:
        return np.array([1.0 if self.constant_obs else float(self.t)], np.float32)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return self._obs(), {}

    def step(self, action):
        self.t += 1
        terminated = self.terminate_at is not None and self.t >= self.terminate_at
        return self._obs(), self.reward, terminated, False, {}


class CrashEnv(CountingEnv):
    """Fails at step `at_step`: raises (`mode="raise"`) or kills its own process (`mode="kill"`)."""

    def __init__(self, at_step: int = 5, mode: str = "raise"):
        super().__init__()
        self.at_step, self.mode = at_step, mode

    def step(self, action):
        if self.t + 1 >= self.at_step:
            if self.mode == "kill":
                os.kill(os.getpid(), signal.SIGKILL)
            raise RuntimeError(f"CrashEnv failed on purpose at step {self.at_step}")
        return super().step(action)


class BlowUpEnv(CountingEnv):
    """Reward 1, then `huge` (finite in float32) once the env has taken `at_step` steps in all: the
    critic's values overflow and the learner diverges, while everything the env returns stays finite."""

    def __init__(self, at_step: int = 300, huge: float = 1e38):
        super().__init__()
        self.at_step, self.huge, self.total_steps = at_step, huge, 0

    def step(self, action):
        self.total_steps += 1
        obs, _, terminated, truncated, info = super().step(action)
        return obs, self.huge if self.total_steps >= self.at_step else 1.0, terminated, truncated, info


class SeedBlowUpEnv(BlowUpEnv):
    """BlowUpEnv only when its first reset is seeded with `bad_seed`: in a run of several seeds (env j of
    seed s is seeded s + j), one seed's learner diverges and the others' do not."""

    def __init__(self, bad_seed: int = 1, at_step: int = 300):
        super().__init__(at_step=at_step)
        self.bad_seed, self.first_seed = bad_seed, None

    def reset(self, *, seed=None, options=None):
        if self.first_seed is None:
            self.first_seed = seed
        return super().reset(seed=seed, options=options)

    def step(self, action):
        obs, reward, terminated, truncated, info = super().step(action)
        return obs, reward if self.first_seed == self.bad_seed else 1.0, terminated, truncated, info


gym.register("InfiniteHorizon-v0", entry_point=CountingEnv, kwargs={"constant_obs": True}, max_episode_steps=8)
gym.register("TerminateAt8-v0", entry_point=CountingEnv, kwargs={"constant_obs": True, "terminate_at": 8})
gym.register("Counting-v0", entry_point=CountingEnv, max_episode_steps=7)
gym.register("CountingBoth-v0", entry_point=CountingEnv, kwargs={"terminate_at": 5}, max_episode_steps=5)
gym.register("Crash-v0", entry_point=CrashEnv)
gym.register("BlowUp-v0", entry_point=BlowUpEnv, max_episode_steps=50)
gym.register("SeedBlowUp-v0", entry_point=SeedBlowUpEnv, max_episode_steps=50)
# Two versions of one env: making the older one warns that it is out of date, as MuJoCo's -v4 ids do.
gym.register("Versioned-v0", entry_point=CountingEnv, max_episode_steps=7)
gym.register("Versioned-v1", entry_point=CountingEnv, max_episode_steps=7)
