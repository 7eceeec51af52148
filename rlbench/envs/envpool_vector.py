"""EnvPool's pools as the host loop's vector env: `--env envpool:HalfCheetah-v4`, or `--vec-env envpool` for a
gymnasium id that EnvPool also has. EnvPool steps its envs in C++ threads, without subprocess workers.

- EnvPool resets an env on the step *after* its episode ends (that step ignores the action and returns the reset
  observation with reward 0). The loop is written for gymnasium's SAME_STEP mode, so on the step that ends an
  episode this adapter resets those envs at once (EnvPool's `reset(env_ids)`, exact in a synchronous pool) and
  returns the first observation of the next episode, with the true final one in `info["final_obs"]`. The step
  EnvPool would spend on the reset never happens: it reaches no buffer, rollout, Monitor file or evaluation.
- Seeds are fixed when a pool is made, one per env: `reset(seed=...)` makes the pool anew with them, so env i
  of `reset(seed=s)` starts as gymnasium's env i does with seed s + i (its own stream, not gymnasium's).
- Actions arrive in [-1, 1] and are rescaled to the Box bounds with gymnasium's own `rescale_box` (so a
  rescaled action is the one RescaleAction would pass); a Discrete env takes its action's index column.
- An EnvPool env's state cannot be saved or replayed from a seed mid-stream: `-i` starts new episodes (see
  rlbench.loop.saving.restore_envs), so such a resume is not bit-exact.
- Images (Atari's frame stacks) come channels first, [C, H, W]; the pool hands them on channels last and flat, as
  rlbench's image observations travel (rlbench.envs.images). With `report_games` (an Atari pool made from RL Zoo's
  AtariWrapper: rlbench.envs.envpool_atari) the pool reports each game, its raw score summed over its lives and its
  length in agent steps, as gymnasium's vector envs carry rlbench's GameMonitor's (rlbench.envs.reported).
"""

from __future__ import annotations

import difflib
import json
import os
import subprocess
import sys
import warnings
from collections.abc import Mapping, Sequence
from functools import cache
from types import ModuleType
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space
from gymnasium.wrappers.utils import rescale_box

from rlbench.envs.atari import is_atari
from rlbench.envs.bounds import unrescalable_bounds
from rlbench.envs.discrete import MAX_ACTIONS, action_indices, index_space
from rlbench.envs.images import FlatImageBox, is_image_space
from rlbench.errors import ConfigError

PREFIX = "envpool:"
INSTALL = 'pip install -e ".[envpool]"'
# What rlbench sets on every pool itself: its size, a synchronous batch (the reset above needs it), its seeds.
MANAGED_KWARGS = frozenset(
    {"num_envs", "batch_size", "seed", "env_seed", "gym_reset_return_info", "max_num_players", "base_path"}
)
POSITIVE_KWARGS = ("max_episode_steps", "frame_skip")  # EnvPool accepts 0 and -1 here, and then misbehaves
MAX_SEED = 2**31 - 2  # EnvPool's seeds are int32 (it asserts -2**31 + 1 <= seed < 2**31 - 1)


def is_envpool(env_id: str) -> bool:
    return env_id.startswith(PREFIX)


def envpool_env_id(env_id: str, vec_env: str) -> str:
    """The id a run's envs are built from: `envpool:X` for `--vec-env envpool` (or `envpool-xla`) with a gymnasium
    id X."""
    return PREFIX + env_id if vec_env.startswith("envpool") and not is_envpool(env_id) else env_id


def task_id(env_id: str) -> str:
    """EnvPool's own name of an `envpool:` id."""
    return env_id.removeprefix(PREFIX)


def import_envpool(env_id: str) -> ModuleType:
    try:
        import envpool
    except ImportError:
        raise ConfigError(f"{env_id} needs EnvPool, which is not installed: {INSTALL}") from None
    return envpool


@cache
def _all_tasks() -> frozenset[str]:
    return frozenset(import_envpool(PREFIX).list_all_envs())


def check_task(env_id: str) -> None:
    """ConfigError naming EnvPool's closest ids when it has no env of `env_id`'s name."""
    task = task_id(env_id)
    if task in _all_tasks():
        return
    close = difflib.get_close_matches(task, sorted(_all_tasks()), n=3)
    hint = f"; did you mean {', '.join(PREFIX + c for c in close)}?" if close else ""
    raise ConfigError(f"environment {env_id!r}: EnvPool {_version()} has no env {task!r}{hint}")


def _version() -> str:
    return str(getattr(import_envpool(PREFIX), "__version__", ""))


def check_kwargs(env_id: str, env_kwargs: Mapping[str, Any], flag: str) -> None:
    """ConfigError (one line naming `flag`) for a kwarg EnvPool's env does not have, one rlbench sets itself,
    or a count that must be positive."""
    valid = set(import_envpool(env_id).make_spec(task_id(env_id)).config._fields) - MANAGED_KWARGS
    for key, value in env_kwargs.items():
        if key in MANAGED_KWARGS:
            raise ConfigError(f"{flag}: {key} is set by rlbench for {env_id} (n_envs, --seed); drop it")
        if key not in valid:
            raise ConfigError(f"{flag}: {env_id} has no kwarg {key!r}; valid: {', '.join(sorted(valid))}")
        if key in POSITIVE_KWARGS and not (isinstance(value, int) and not isinstance(value, bool) and value > 0):
            raise ConfigError(f"{flag}: {env_id}'s {key} must be a positive integer, got {value!r}")


class EnvPoolVectorEnv(VectorEnv):
    """A synchronous EnvPool pool of `num_envs` envs in gymnasium's SAME_STEP autoreset mode, acting in [-1, 1]
    (module docstring)."""

    def __init__(self, env_id: str, num_envs: int, env_kwargs: Mapping[str, Any], report_games: bool = False):
        self.env_id, self.num_envs, self._kwargs = env_id, num_envs, dict(env_kwargs)
        self.report_games = report_games
        self._scores, self._lengths = np.zeros(num_envs), np.zeros(num_envs, np.int64)  # each env's game so far
        self.metadata = {"autoreset_mode": AutoresetMode.SAME_STEP}
        self._pool = self._make_pool(list(range(num_envs)))
        space = self._pool.action_space
        if isinstance(space, gym.spaces.Discrete):
            self.n_actions, self.first_action = int(space.n), int(space.start)
            if self.n_actions > MAX_ACTIONS:
                raise ConfigError(f"{env_id}: {space} has more actions than rlbench's learners index exactly")
            self.single_action_space: gym.spaces.Box = index_space(self.n_actions)
        elif isinstance(space, gym.spaces.Box) and np.issubdtype(space.dtype, np.floating):
            self.n_actions, self.first_action = 0, 0
            if (unrescalable := unrescalable_bounds(space.low, space.high)) is not None:
                raise ConfigError(f"{env_id}: {unrescalable}")
            ones = np.ones(space.shape, np.float32)
            self.single_action_space, _, self._rescaled = rescale_box(space, -ones, ones)
        else:
            raise ConfigError(f"{env_id}: rlbench supports Box (float) and Discrete action spaces, got {space}")
        observation_space = self._pool.observation_space
        self.images = is_image_space(observation_space)  # channels first: [C, H, W]
        if self.images:
            channels, height, width = observation_space.shape
            observation_space = FlatImageBox((height, width, channels))
        elif not isinstance(observation_space, gym.spaces.Box) or len(observation_space.shape) != 1:
            raise ConfigError(f"{env_id}: rlbench needs a flat Box observation space, got {observation_space}")
        self.original_action_space: gym.spaces.Box = space if self.n_actions == 0 else self.single_action_space
        self.single_observation_space: gym.spaces.Box = observation_space
        self.observation_space = batch_space(observation_space, num_envs)
        self.action_space = batch_space(self.single_action_space, num_envs)

    def _make_pool(self, seeds: Sequence[int]) -> Any:
        envpool = import_envpool(self.env_id)
        # Seeds beyond int32 wrap (rlbench's seeds go to 2**32 - 1, as SB3's).
        env_seeds = [int(seed) % (MAX_SEED + 1) for seed in seeds]
        with warnings.catch_warnings():  # gymnasium's Box on EnvPool's float64 bounds: "precision lowered"
            warnings.filterwarnings("ignore", message=".*precision lowered", category=UserWarning)
            pool = envpool.make_gymnasium(
                task_id(self.env_id), num_envs=self.num_envs, batch_size=self.num_envs, seed=env_seeds, **self._kwargs
            )
            pool.observation_space, pool.action_space  # noqa: B018  (built on first access: here, quietly)
            return pool

    def reset(
        self, *, seed: int | Sequence[int] | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        if options:
            raise ValueError(f"{self.env_id}: reset options are not supported, got {sorted(options)}")
        if seed is not None:
            seeds = [seed + i for i in range(self.num_envs)] if isinstance(seed, int) else list(seed)
            if len(seeds) != self.num_envs:
                raise ValueError(f"{len(seeds)} seeds for {self.num_envs} envs")
            self._pool.close()
            self._pool = self._make_pool(seeds)
        obs, _ = self._pool.reset()
        self._scores[:], self._lengths[:] = 0.0, 0
        return self._observations(obs), {}

    def step(self, actions: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        obs, reward, terminated, truncated, pool_info = self._pool.step(self._pool_actions(actions))
        obs = self._observations(obs)
        infos: dict[str, Any] = {}
        ended = terminated | truncated
        if ended.any():  # reset them now (SAME_STEP): the step EnvPool would spend on it never happens
            ids = np.flatnonzero(ended).astype(np.int32)
            final_obs = np.full(self.num_envs, None, dtype=object)  # gymnasium's form: None where none ended
            final_obs[ids] = list(obs[ids])
            obs = obs.copy()
            obs[ids] = self._next_episodes(ids)
            infos = {"final_obs": final_obs, "_final_obs": ended}
        if self.report_games:
            infos |= self._games(pool_info, truncated)
        return obs, reward.astype(np.float64), terminated, truncated, infos

    def _next_episodes(self, ids: np.ndarray) -> np.ndarray:
        """The first observations of the next episodes of envs `ids`. With episodic_life, EnvPool's own reset step
        (a step of those envs alone; its action is ignored): it continues the game after a life lost, where
        `reset(ids)` would start a new game; else `reset(ids)`."""
        if not self._kwargs.get("episodic_life", False):
            return self._observations(self._pool.reset(ids)[0])
        space = self._pool.action_space
        obs, *_, info = self._pool.step(np.zeros((len(ids), *space.shape), space.dtype), ids)
        first = np.empty((len(ids), *obs.shape[1:]), obs.dtype)
        first[np.searchsorted(ids, info["env_id"])] = obs  # in the order of `ids`, whatever EnvPool's
        return self._observations(first)

    def _observations(self, obs: np.ndarray) -> np.ndarray:
        """Images channels last, flat ([n, H * W * C] uint8); other observations as they are."""
        return frames_channels_last(obs) if self.images else obs

    def _games(self, pool_info: Mapping[str, Any], truncated: np.ndarray) -> dict[str, Any]:
        """The games that ended on this step, as gymnasium's vector envs carry an ending step's info["episode"]
        (rlbench.envs.reported): EnvPool's info["reward"] is the raw reward, info["terminated"] the game's end
        (its step's `terminated` is a life's with episodic_life)."""
        self._scores += pool_info["reward"]
        self._lengths += 1
        over = np.asarray(pool_info["terminated"], bool) | truncated
        if not over.any():
            return {}
        games = {"r": np.where(over, self._scores, 0.0), "l": np.where(over, self._lengths, 0)}
        self._scores[over], self._lengths[over] = 0.0, 0
        return {"final_info": {"episode": games, "_episode": over}, "_final_info": over}

    def _pool_actions(self, actions: np.ndarray) -> np.ndarray:
        actions = np.asarray(actions).reshape(self.num_envs, -1)
        if self.n_actions:
            return (self.first_action + action_indices(actions[:, 0], self.n_actions)).astype(np.int32)
        return np.asarray(self._rescaled(actions.astype(np.float32)))

    def close_extras(self, **kwargs: Any) -> None:
        self._pool.close()


def frames_channels_last(frames: Any) -> Any:
    """EnvPool's frame stacks [n, C, H, W] -> [n, H * W * C], the flat channels-last layout rlbench's image
    observations travel in (a contiguous copy); numpy arrays, or traced ones inside the device loop's programs."""
    return frames.transpose(0, 2, 3, 1).reshape(frames.shape[0], -1)


def pool_spaces(env_id: str, env_kwargs: Mapping[str, Any], flag: str) -> tuple[gym.spaces.Box, gym.spaces.Box]:
    """check_env_runs for an EnvPool id: its kwargs checked, one env built, reset and stepped; returns (observation
    space, action space before rescaling: a Discrete env's index space)."""
    check_kwargs(env_id, env_kwargs, flag)
    try:
        env = EnvPoolVectorEnv(env_id, 1, env_kwargs)
    except ConfigError:
        raise
    except Exception as error:  # EnvPool's pybind constructors raise TypeError, with every signature in it
        first_line = str(error).splitlines()[0] if str(error) else ""
        raise ConfigError(
            f"{flag}: {env_id} fails with {dict(env_kwargs)}: {type(error).__name__}: {first_line}"
        ) from None
    try:
        env.reset(seed=0)
        env.step(np.zeros((1, *env.single_action_space.shape), np.float32))
        return env.single_observation_space, env.original_action_space
    finally:
        env.close()


# Below this many envs the memory check is skipped: its fresh process costs about a second, and 64 envs of any
# EnvPool task measured here fit in a few GiB (HalfCheetah-v4: 1.1-1.3 MiB each).
CHECKED_ABOVE = 64
_PROBE = """
import json, sys, warnings
warnings.simplefilter("ignore")
from rlbench.envs.envpool_vector import EnvPoolVectorEnv, resident_bytes
env_id, kwargs, n = sys.argv[1], json.loads(sys.argv[2]), int(sys.argv[3])
warm = EnvPoolVectorEnv(env_id, 1, kwargs)  # the libraries and assets a first pool loads, once a process
warm.reset(seed=0)
before = resident_bytes()
pool = EnvPoolVectorEnv(env_id, n, kwargs)
pool.reset(seed=0)
print((resident_bytes() - before) / n)
"""


def check_pool_memory(env_id: str, env_kwargs: Mapping[str, Any], num_envs: int, available: int | None) -> None:
    """Refuse more than CHECKED_ABOVE envs when they do not fit in `available` bytes, from what a pool of 16 takes
    beyond a pool of one (an env's model, data and buffers: about 1.1-1.3 MiB for HalfCheetah, much more for
    Atari's frames), measured in a fresh process: this one's resident size moves with everything else it does (a
    collection during the probe read as a negative size)."""
    if available is None or num_envs <= CHECKED_ABOVE:
        return
    probe = 16
    code = [sys.executable, "-c", _PROBE, env_id, json.dumps(dict(env_kwargs)), str(probe)]
    done = subprocess.run(code, capture_output=True, text=True, timeout=300, check=False)
    if done.returncode != 0:  # the kwargs were checked already (pool_spaces): a machine without memory to probe
        raise ConfigError(f"{env_id}: could not measure a pool of {probe} envs: {done.stderr.strip()[-300:]}")
    per_env = max(float(done.stdout.split()[-1]), 0.0)
    if per_env * num_envs > available:
        raise ConfigError(
            f"{env_id}: {num_envs} envs need about {per_env * num_envs / 2**30:.1f} GiB ({per_env / 2**20:.2f} MiB "
            f"each, measured), but only {available / 2**30:.1f} GiB is available; use fewer envs or seeds"
        )


def resident_bytes() -> int:
    """This process's resident memory (Linux)."""
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


class EnvPoolEnv(gym.Env[np.ndarray, np.ndarray]):
    """One EnvPool env as a gymnasium env (enjoy.py steps envs one by one): a pool of one. An ending step returns
    the final observation; the pool has already started the next episode, which the next `reset()` returns."""

    def __init__(self, env_id: str, env_kwargs: Mapping[str, Any], report_games: bool = False):
        self._vector = EnvPoolVectorEnv(env_id, 1, env_kwargs, report_games)
        self.reports_episodes = report_games  # rlbench.envs.reported.env_reports_episodes reads it
        self.observation_space = self._vector.single_observation_space
        self.action_space = self._vector.single_action_space
        self._next_episode: np.ndarray | None = None

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        if seed is None and options is None and self._next_episode is not None:
            obs, self._next_episode = self._next_episode, None
            return obs, {}
        self._next_episode = None
        obs, _ = self._vector.reset(seed=None if seed is None else [seed], options=options)
        return obs[0], {}

    def step(self, action: np.ndarray) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        obs, reward, terminated, truncated, infos = self._vector.step(np.asarray(action)[None])
        info: dict[str, Any] = {}
        if "_episode" in infos.get("final_info", {}) and infos["final_info"]["_episode"][0]:  # a game reported
            game = infos["final_info"]["episode"]
            info["episode"] = {"r": float(game["r"][0]), "l": int(game["l"][0])}
        if terminated[0] or truncated[0]:
            self._next_episode = obs[0]
            return infos["final_obs"][0], float(reward[0]), bool(terminated[0]), bool(truncated[0]), info
        return obs[0], float(reward[0]), False, False, info

    def close(self) -> None:
        self._vector.close()


def rendered_env_id(env_id: str) -> tuple[str, str]:
    """The env that renders in place of `env_id`, and how it relates to it (for the line enjoy.py prints). An
    EnvPool id: gymnasium's of the same id (EnvPool's MuJoCo renderer needs an OpenGL context it does not create
    headless, and its failure ends the process), which steps as EnvPool's does from the same state
    (benchmarks/README.md); an EnvPool Atari game (which draws no frames but its 84x84 grey ones): ale-py's
    NoFrameskip-v4 of the same game, which the run's AtariWrapper and frame_stack preprocess as the pool's options
    did (rlbench.envs.envpool_atari), so the policy sees the frames it was trained on. ConfigError where gymnasium
    has no such env."""
    if not is_envpool(env_id):
        return env_id, ""
    task = task_id(env_id)
    if is_atari(task):  # registers ale-py's games
        task = f"{task.split('-v')[0]}NoFrameskip-v4"
        how = "the same game, its frames preprocessed as the pool's (AtariWrapper, frame_stack)"
    else:
        how = "which steps as EnvPool's"
    if task not in gym.registry:
        raise ConfigError(
            f"{env_id} cannot be rendered: EnvPool draws no frames here, and gymnasium, which would, has no "
            f"{task}; play it without frames (--no-render, no --record)"
        )
    return task, how
