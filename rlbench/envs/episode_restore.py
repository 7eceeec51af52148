"""Putting a training env back where its episode was, on resume.

Training envs carry an `EpisodeRecorder`: gymnasium has no general way to save an env's state,
but an env is a deterministic function of how its episode started (seed or RNG state) and the
actions since, so a resumed run rebuilds each env by replaying them, then checks the observation.

An env whose reset can carry on from where it was (Atari's EpisodicLife: a life lost ends the agent's
episode, and the "reset" after it is a NOOP step of the same game) says so with `reset_continued_game`;
the record then goes on from the game's start, with the positions of those resets, and the replay makes
them where they were made. Its `game_over` set True makes the next reset start a new game.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, SupportsFloat, cast

import gymnasium as gym
import numpy as np
import numpy.typing as npt
from gymnasium.vector import AsyncVectorEnv, SyncVectorEnv, VectorEnv

# The attributes of an env in the wrapper stack whose reset can carry on from the env's state: whether the last one
# did, and (set True) that the next one starts a new game, as the replay of an episode begun from the RNG must.
CONTINUED, GAME_OVER = "reset_continued_game", "game_over"


@dataclass
class EpisodeRecord:
    """How one env's current episode started ({"seed": s} or {"rng": bit-generator state}, with "resets": the
    positions in `actions` of the resets that carried its game on, when there were any) and the actions it has
    taken since; None for an env that cannot be rebuilt this way."""

    start: dict[str, Any]
    actions: npt.NDArray[np.float32]  # [steps, action_dim], exactly as passed to env.step


class EpisodeRecorder(gym.Wrapper[np.ndarray, np.ndarray, np.ndarray, np.ndarray]):
    """Remembers how the current episode started and every action since, so that a resumed run can
    put the env back in its exact state by replaying them (`restore_episode`)."""

    MAX_STEPS = 100_000  # beyond this an episode is not recorded (memory), and resumes as a new one

    def __init__(self, env: gym.Env[np.ndarray, np.ndarray]):
        super().__init__(env)
        self._start: dict[str, Any] | None = None
        self._actions: list[np.ndarray] | None = None
        self._resets: list[int] = []  # where in _actions a reset carried the game on
        self.restore_request: EpisodeRecord | None = None

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        start: dict[str, Any] | None = None  # options may hold anything: not replayable
        if options is None:
            start = {"rng": _rng_state(self.unwrapped.np_random)} if seed is None else {"seed": int(seed)}
        obs, info = super().reset(seed=seed, options=options)
        if options is not None or seed is not None or not self._continued():
            self._start, self._actions, self._resets = start, [], []
        elif self._start is not None and self._actions is not None:  # else the game was not recorded: it stays so
            self._resets.append(len(self._actions))
        return obs, info

    def _continued(self) -> bool:
        """Whether the reset just made carried on from the env's state (an env that never does: False)."""
        try:
            return bool(self.env.get_wrapper_attr(CONTINUED))
        except AttributeError:
            return False

    def step(self, action: np.ndarray) -> tuple[np.ndarray, SupportsFloat, bool, bool, dict[str, Any]]:
        if self._actions is not None:
            if len(self._actions) < self.MAX_STEPS:
                self._actions.append(np.array(action, dtype=np.float32, copy=True))
            else:
                self._actions = None
        return super().step(action)

    def episode_record(self) -> EpisodeRecord | None:
        if self._start is None or self._actions is None:
            return None
        shape = self.action_space.shape
        assert shape is not None, "a Box or Discrete action space has a shape"
        actions = np.array(self._actions, np.float32).reshape(len(self._actions), *shape)
        resets = {"resets": list(self._resets)} if self._resets else {}
        return EpisodeRecord({**self._start, **resets}, actions)

    def restore_episode(self) -> np.ndarray:
        """Replay `self.restore_request` (set through the vector env's set_attr); None, or a record whose resets
        lie beyond its actions, starts a new episode from the env's own RNG. Returns the observation reached."""
        record, self.restore_request = self.restore_request, None
        resets = set() if record is None else set(record.start.get("resets", ()))
        if record is None or any(position > len(record.actions) for position in resets):
            return self.reset()[0]
        if "seed" in record.start:
            obs, _ = self.reset(seed=record.start["seed"])
        else:
            self.unwrapped.np_random = _rng_from_state(record.start["rng"])
            if self.env.has_wrapper_attr(GAME_OVER):  # not a life of the game this env is in
                self.env.set_wrapper_attr(GAME_OVER, True)
            obs, _ = self.reset()
        for position in range(len(record.actions) + 1):
            if position in resets:
                obs, _ = self.reset()
            if position < len(record.actions):
                obs, *_ = self.step(record.actions[position])
        return obs


def _rng_state(rng: np.random.Generator) -> dict[str, Any]:
    state = rng.bit_generator.state
    return {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in state.items()}


def _rng_from_state(state: dict[str, Any]) -> np.random.Generator:
    bit_generator = getattr(np.random, state["bit_generator"])()
    bit_generator.state = state
    return np.random.Generator(bit_generator)


def _attribute_env(env: VectorEnv) -> SyncVectorEnv | AsyncVectorEnv:
    """`env` as the vector envs make_vector_env builds, which have gymnasium's `call` and `set_attr`."""
    return cast(SyncVectorEnv | AsyncVectorEnv, env)


def episode_records(env: VectorEnv) -> list[EpisodeRecord | None] | None:
    """Each training env's EpisodeRecord, or None when the envs cannot be asked (a dead worker, or EnvPool's
    pool, whose envs live in C++ and keep no record: a resume starts new episodes)."""
    if not isinstance(env, SyncVectorEnv | AsyncVectorEnv):
        return None
    try:
        return list(_attribute_env(env).call("episode_record"))
    except Exception as error:  # a broken worker must not stop the checkpoint that follows
        warnings.warn(
            f"could not record the envs' episodes ({type(error).__name__}: {error}); "
            "a resume from this checkpoint starts new episodes",
            stacklevel=2,
        )
        return None


def restore_episodes(
    env: VectorEnv, records: Sequence[EpisodeRecord | None], saved_obs: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Replay each env's record; returns (observations, restored [n_envs] bool). An env without a
    record, or whose replay does not reproduce the saved observation bit for bit (a non-deterministic
    env), starts a new episode from its own RNG instead and is reported as not restored.

    The observations are compared and returned in the saved observations' dtype, the env's own: MuJoCo's
    are float64, and a float32 copy of a replayed one never equals the saved float64 one (which made every
    MuJoCo env start a new episode on resume)."""
    records = list(records)
    envs = _attribute_env(env)
    envs.set_attr("restore_request", records)
    obs = np.stack(envs.call("restore_episode")).astype(saved_obs.dtype, copy=False)
    restored = np.array([r is not None for r in records]) & np.all(obs == saved_obs, axis=1)
    if any(r is not None and not ok for r, ok in zip(records, restored, strict=True)):
        # Replaying the good ones again is exact too, and keeps this one call for all envs.
        envs.set_attr("restore_request", [r if ok else None for r, ok in zip(records, restored, strict=True)])
        obs = np.stack(envs.call("restore_episode")).astype(saved_obs.dtype, copy=False)
    return obs, restored
