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


class BrightSideEnv(gym.Env):
    """Image observations for CnnPolicy: a uint8 [36, 36, 1] frame (NatureCNN's smallest) lit on its left or
    right half, drawn from the env's generator each step; Discrete(2) actions, reward 1 for naming the lit side
    (0 left, 1 right) of the frame acted on, else 0. A random policy earns half a point a step, one that reads the
    image one. Episodes end by the registration's time limit. `side`: the frame's height and width; `box_actions`:
    a Box action in [-1, 1] instead, naming the right side when positive."""

    def __init__(self, side: int = 36, box_actions: bool = False):
        self.observation_space = gym.spaces.Box(0, 255, (side, side, 1), np.uint8)
        self.action_space = gym.spaces.Box(-1.0, 1.0, (1,), np.float32) if box_actions else gym.spaces.Discrete(2)
        self.side, self.lit, self.box_actions = side, 0, box_actions

    def _obs(self) -> np.ndarray:
        self.lit = int(self.np_random.integers(2))
        frame = np.zeros(self.observation_space.shape, np.uint8)
        frame[:, self.lit * self.side // 2 : (self.lit + 1) * self.side // 2] = 255
        return frame

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return self._obs(), {}

    def step(self, action):
        side = int(action[0] > 0) if self.box_actions else int(action)
        reward = float(side == self.lit)
        return self._obs(), reward, False, False, {}


gym.register("BrightSide-v0", entry_point=BrightSideEnv, max_episode_steps=16)
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
