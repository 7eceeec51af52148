"""Atari envs over ale-py, and SB3's AtariWrapper written for rlbench.

RL Zoo's atari entries name `stable_baselines3.common.atari_wrappers.AtariWrapper`; rlbench resolves that name
to `AtariWrapper` here (rlbench.envs.wrappers.STAND_INS) without importing SB3, which imports torch. It is
DeepMind's Nature-DQN preprocessing composed as SB3 composes it, innermost first:

1. sticky actions (only with action_repeat_probability > 0): the previous action repeats with that probability;
2. no-op reset: 1..noop_max NOOPs after each reset, their count drawn from the env's np_random;
3. frame skip: the action repeats frame_skip times, rewards summed, the observation the max of the last two
   frames (Atari sprites flicker between frames);
4. episodic life: a life lost ends the agent's episode (terminated), but the game resets only when it is over;
   a reset after a life lost is a NOOP step;
5. fire reset: games that wait for FIRE get FIRE then action 2 on each reset;
6. 84x84 grey frames, (84, 84, 1) uint8 channels last;
7. rewards clipped to their sign.

The wrapped env must be ALE's with frameskip=1 (`BreakoutNoFrameskip-v4`, or `ALE/Breakout-v5` made with
frameskip=1): ALE's own frame skip under this one would skip 16 frames. ale-py and OpenCV are the `atari` extra,
imported only where an Atari env is registered or wrapped, so rlbench imports without them.
"""

from __future__ import annotations

import importlib
import importlib.util
from types import ModuleType
from typing import Any, SupportsFloat

import gymnasium as gym
import numpy as np

from rlbench.errors import ConfigError

Step = tuple[np.ndarray, SupportsFloat, bool, bool, dict[str, Any]]
Reset = tuple[np.ndarray, dict[str, Any]]
NOOP, FIRE = 0, 1  # ALE's action indices (its minimal action sets keep the full set's order)
_ATARI_SUFFIXES = ("NoFrameskip-v4", "NoFrameskip-v0")


def atari_module(name: str) -> ModuleType:
    """`ale_py` or `cv2`, imported now; ConfigError naming the extra when it is not installed."""
    try:
        return importlib.import_module(name)
    except ImportError as error:
        raise ConfigError(f'Atari envs need ale-py and OpenCV: pip install -e ".[atari]" ({error})') from None


def looks_atari(env_id: str) -> bool:
    """Whether the id alone says Atari: `ALE/...` (ale-py's v5 ids) or `...NoFrameskip-v4` (its v0/v4 ids)."""
    return env_id.startswith("ALE/") or env_id.endswith(_ATARI_SUFFIXES)


def register_atari_envs(env_id: str) -> None:
    """Register ale-py's ids before gym.make when `env_id` is one of them. An id that merely is not registered
    (Breakout-v4) imports ale-py too, when installed: its import registers all of its ids at once."""
    if looks_atari(env_id):
        gym.register_envs(atari_module("ale_py"))
    elif ":" not in env_id and env_id not in gym.registry and importlib.util.find_spec("ale_py") is not None:
        gym.register_envs(importlib.import_module("ale_py"))


def is_atari(env_id: str) -> bool:
    """RL Zoo's test for "this env takes the `atari` hyperparameter entry": its registered entry point is
    ale-py's AtariEnv. Without ale-py installed, the id's pattern decides (`looks_atari`)."""
    if importlib.util.find_spec("ale_py") is None:
        return looks_atari(env_id)
    gym.register_envs(importlib.import_module("ale_py"))
    spec = gym.registry.get(env_id) or gym.registry.get(f"ALE/{env_id}")  # EnvPool's Breakout-v5 is ALE/Breakout-v5
    return spec is not None and "AtariEnv" in str(spec.entry_point)


def action_meanings(env: gym.Env[Any, Any]) -> list[str]:
    """ALE's names of the env's actions ("NOOP", "FIRE", ...); ConfigError for an env that is not ALE's."""
    meanings = getattr(env.unwrapped, "get_action_meanings", None)
    if meanings is None:
        raise ConfigError(f"AtariWrapper wraps an ALE env (ale-py's AtariEnv), got {env.unwrapped}")
    return list(meanings())


def check_no_frameskip(env: gym.Env[Any, Any]) -> None:
    """ConfigError (a ValueError) for an env that skips frames itself (ALE's frameskip, an int or a random range)."""
    frameskip = getattr(env.unwrapped, "_frameskip", 1)
    if frameskip != 1:
        name = env.spec.id if env.spec is not None else type(env.unwrapped).__name__
        raise ConfigError(
            f"AtariWrapper on {name}: the env skips frames itself (frameskip={frameskip}) and the wrapper skips "
            "them again; use a NoFrameskip id (e.g. BreakoutNoFrameskip-v4) or make it with frameskip=1"
        )


class AtariWrapper(gym.Wrapper[np.ndarray, int, np.ndarray, int]):
    """SB3's AtariWrapper: the preprocessing of the module docstring, with SB3's keyword arguments, over a
    GameMonitor that reports each game (rlbench.envs.reported)."""

    reports_episodes = True

    def __init__(
        self,
        env: gym.Env[np.ndarray, int],
        noop_max: int = 30,
        frame_skip: int = 4,
        screen_size: int = 84,
        terminal_on_life_loss: bool = True,
        clip_reward: bool = True,
        action_repeat_probability: float = 0.0,
    ):
        check_no_frameskip(env)
        meanings = action_meanings(env)
        if meanings[NOOP] != "NOOP":
            raise ConfigError(f"AtariWrapper: the env's action 0 must be NOOP, got {meanings[NOOP]!r}")
        env = GameMonitor(env)
        if action_repeat_probability > 0.0:
            env = StickyActions(env, action_repeat_probability)
        if noop_max > 0:
            env = NoopReset(env, noop_max)
        if frame_skip > 1:  # 1 is no frame skip
            env = MaxAndSkip(env, frame_skip)
        if terminal_on_life_loss:
            env = EpisodicLife(env)
        if presses_fire(meanings):
            env = FireReset(env)
        env = WarpFrame(env, screen_size)
        if clip_reward:
            env = ClipReward(env)
        super().__init__(env)


class GameMonitor(gym.Wrapper[np.ndarray, int, np.ndarray, int]):
    """SB3's Monitor where RL Zoo puts it, under the preprocessing: each game's raw score (unclipped) and length
    in emulator frames, in the info of the step that ends it as info["episode"] = {"r": score, "l": frames}.
    The agent's episodes end at every life lost; the Monitor files and evaluations count games, as RL Zoo's."""

    def __init__(self, env: gym.Env[np.ndarray, int]):
        super().__init__(env)
        self.score, self.frames = 0.0, 0

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> Reset:
        self.score, self.frames = 0.0, 0
        return self.env.reset(seed=seed, options=options)

    def step(self, action: int) -> Step:
        obs, reward, terminated, truncated, info = self.env.step(action)
        self.score += float(reward)
        self.frames += 1
        if terminated or truncated:
            info = {**info, "episode": {"r": self.score, "l": self.frames}}
        return obs, reward, terminated, truncated, info


def presses_fire(meanings: list[str]) -> bool:
    """Whether the game waits for FIRE: FIRE is action 1 and there is an action 2 to press after it. (SB3
    tests "FIRE" in the meanings and asserts these; ALE's action sets put FIRE at 1 whenever it has one.)"""
    return len(meanings) >= 3 and meanings[FIRE] == "FIRE"


class StickyActions(gym.Wrapper[np.ndarray, int, np.ndarray, int]):
    """The previous action repeats with probability `action_repeat_probability` (Machado et al. 2018), drawn
    from the env's np_random; NOOP is the previous action after a reset."""

    def __init__(self, env: gym.Env[np.ndarray, int], action_repeat_probability: float):
        super().__init__(env)
        self.action_repeat_probability = action_repeat_probability
        self._action = NOOP

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> Reset:
        self._action = NOOP
        return self.env.reset(seed=seed, options=options)

    def step(self, action: int) -> Step:
        if self.np_random.random() >= self.action_repeat_probability:
            self._action = action
        return self.env.step(self._action)


class NoopReset(gym.Wrapper[np.ndarray, int, np.ndarray, int]):
    """After each reset, a number of NOOPs drawn uniformly in [1, noop_max] from the env's np_random: varied
    starting states. An episode that ends during them is reset again (without more NOOPs)."""

    def __init__(self, env: gym.Env[np.ndarray, int], noop_max: int):
        super().__init__(env)
        self.noop_max = noop_max

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> Reset:
        obs, info = self.env.reset(seed=seed, options=options)
        # Drawn after the reset: ale-py reseeds its np_random there when given a seed.
        for _ in range(int(self.unwrapped.np_random.integers(1, self.noop_max + 1))):
            obs, _, terminated, truncated, info = self.env.step(NOOP)
            if terminated or truncated:
                obs, info = self.env.reset(seed=seed, options=options)
        return obs, info


class MaxAndSkip(gym.Wrapper[np.ndarray, int, np.ndarray, int]):
    """The action repeated `skip` times (fewer when the episode ends first), rewards summed, and the pixel-wise
    max of the last two frames as the observation: some games draw a sprite only every other frame.

    A step that ends after its first frame returns that frame. (SB3 returns its buffer then, which still holds
    frames of the step before; the two agree on every step that runs at least two frames.)"""

    def __init__(self, env: gym.Env[np.ndarray, int], skip: int):
        super().__init__(env)
        self.skip = skip

    def step(self, action: int) -> Step:
        total_reward = 0.0
        last_two: list[np.ndarray] = []
        for _ in range(self.skip):
            obs, reward, terminated, truncated, info = self.env.step(action)
            last_two = [*last_two[-1:], obs]
            total_reward += float(reward)
            if terminated or truncated:
                break
        return np.max(last_two, axis=0), total_reward, terminated, truncated, info


class EpisodicLife(gym.Wrapper[np.ndarray, int, np.ndarray, int]):
    """A life lost is the end of the agent's episode (terminated=True), which helps value estimation (DeepMind's
    DQN); the game itself resets only when it is over, so a reset after a life lost is one NOOP step instead
    (its reward is not seen), and every state of a game stays reachable. A reset given a seed starts a new game
    whatever the lives left: the vector env's own resets after an episode come without one, and a seed is what
    asks for a new start (an evaluation's first reset: SB3's would carry on the game the last evaluation left, and
    its Monitor would add that game's earlier score to the next one it reports)."""

    def __init__(self, env: gym.Env[np.ndarray, int]):
        super().__init__(env)
        self.lives = 0
        self.game_over = True  # True: the next reset starts a new game (rlbench.envs.episode_restore sets it too)
        # Whether the last reset carried the game on (rlbench.envs.episode_restore replays such resets in place).
        self.reset_continued_game = False

    def step(self, action: int) -> Step:
        obs, reward, terminated, truncated, info = self.env.step(action)
        self.game_over = terminated or truncated
        lives = self.unwrapped.ale.lives()  # type: ignore[attr-defined]  # ale-py's AtariEnv (action_meanings)
        # `0 < lives`: some games (Qbert) sit at 0 lives for a few frames before the game ends; that is not a
        # life lost but the game over the env reports itself, once.
        if 0 < lives < self.lives:
            terminated = True
        self.lives = lives  # after the test: a bonus life raises it
        return obs, reward, terminated, truncated, info

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> Reset:
        self.reset_continued_game = not (self.game_over or seed is not None)
        if not self.reset_continued_game:
            obs, info = self.env.reset(seed=seed, options=options)
        else:
            obs, _, terminated, truncated, info = self.env.step(NOOP)
            if terminated or truncated:  # the NOOP ended the game
                obs, info = self.env.reset(seed=seed, options=options)
        self.lives = self.unwrapped.ale.lives()  # type: ignore[attr-defined]
        return obs, info


class FireReset(gym.Wrapper[np.ndarray, int, np.ndarray, int]):
    """FIRE, then action 2, on each reset: games such as Breakout stand still until FIRE is pressed."""

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> Reset:
        obs, info = self.env.reset(seed=seed, options=options)
        for action in (FIRE, 2):
            obs, _, terminated, truncated, info = self.env.step(action)
            if terminated or truncated:
                obs, info = self.env.reset(seed=seed, options=options)
        return obs, info


class WarpFrame(gym.ObservationWrapper[np.ndarray, int, np.ndarray]):
    """RGB frames as `size` x `size` grey images, (size, size, 1) channels last, resized with OpenCV's INTER_AREA
    (SB3's and DeepMind's; another interpolation gives other pixels, and a policy trained on one sees noise)."""

    def __init__(self, env: gym.Env[np.ndarray, int], size: int):
        super().__init__(env)
        self.cv2 = atari_module("cv2")
        self.cv2.ocl.setUseOpenCL(False)  # as SB3: OpenCL buys nothing for 84x84 and may not be there
        self.size = size
        self.observation_space = gym.spaces.Box(low=0, high=255, shape=(size, size, 1), dtype=np.uint8)

    def observation(self, observation: np.ndarray) -> np.ndarray:
        grey = self.cv2.cvtColor(observation, self.cv2.COLOR_RGB2GRAY)
        resized = self.cv2.resize(grey, (self.size, self.size), interpolation=self.cv2.INTER_AREA)
        return np.asarray(resized, np.uint8)[:, :, None]


class ClipReward(gym.RewardWrapper[np.ndarray, int]):
    """Rewards clipped to their sign, -1, 0 or 1: one learning rate fits every game's score scale."""

    def reward(self, reward: SupportsFloat) -> float:
        return float(np.sign(float(reward)))
