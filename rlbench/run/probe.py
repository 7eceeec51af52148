"""A run's envs checked before anything is written: their kwargs merged (the file's, --env-kwargs,
--eval-env-kwargs), one env built, reset and stepped with each set (what the env rejects is refused now,
not at the first step or the first evaluation, after training), its spaces recorded; and the run's counts,
seed and log folder, as train.py's flags name them.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypedDict

import gymnasium as gym
import numpy as np

from rlbench.config.literals import LiteralError, parse_key_values
from rlbench.config.values import literal_mapping, positive_int
from rlbench.envs.checks import check_env_runs
from rlbench.envs.envpool_vector import envpool_env_id
from rlbench.envs.images import recorded_shape
from rlbench.envs.wrappers import EnvWrapper
from rlbench.errors import ConfigError
from rlbench.run.memory import available_memory_bytes
from rlbench.run.request import RunRequest
from rlbench.store.manifest import Spaces
from rlbench.store.schema import MAX_SEED
from rlbench.types import EnvSpec


class SpaceRecord(TypedDict):
    """A Box space as the manifest records it (JSON: lists, the dtype's name)."""

    shape: list[int]
    dtype: str
    low: list[float]
    high: list[float]


@dataclass(frozen=True)
class Envs:
    env_kwargs: dict[str, Any]
    eval_env_kwargs: dict[str, Any]
    spaces: dict[str, SpaceRecord]  # "observation" and "action", as the manifest records them
    spec: EnvSpec


def probe_envs(request: RunRequest, run_keys: Mapping[str, Any], wrappers: tuple[EnvWrapper, ...]) -> Envs:
    """The envs' kwargs, the run's counts and folder checked, then one env built, reset and stepped with each
    set of kwargs: what the env rejects is refused now, not at the first step or the first evaluation."""
    try:
        env_kwargs_cli = parse_key_values(request.env_kwargs, "--env-kwargs")
        eval_cli = None
        if request.eval_env_kwargs is not None:
            eval_cli = parse_key_values(request.eval_env_kwargs, "--eval-env-kwargs")
    except LiteralError as error:
        raise ConfigError(str(error)) from None
    file_env_kwargs = literal_mapping(run_keys.get("env_kwargs"), "env_kwargs")
    env_kwargs = file_env_kwargs | env_kwargs_cli
    # Unlike RL Zoo, the file's env_kwargs reach the evaluation env too, unless --eval-env-kwargs is given.
    eval_env_kwargs = env_kwargs if eval_cli is None else file_env_kwargs | eval_cli
    check_run_numbers(request)
    packages, env_id = request.gym_packages, envpool_env_id(request.env, request.vec_env)
    obs_space, action_space = check_env_runs(env_id, env_kwargs, wrappers, packages, "--env-kwargs / env_kwargs")
    spaces = {"observation": describe_space(obs_space), "action": describe_space(action_space)}
    if request.eval_freq > 0 and eval_env_kwargs != env_kwargs:
        check_env_runs(env_id, eval_env_kwargs, wrappers, packages, "--eval-env-kwargs")
    return Envs(env_kwargs, eval_env_kwargs, spaces, spaces_spec(spaces))


def check_run_numbers(request: RunRequest) -> None:
    """The evaluation and seed counts, --keep-checkpoints, --seed and -f, as train.py's flags name them."""
    for name, value in (
        ("--eval-episodes", request.eval_episodes),
        ("--n-eval-envs", request.n_eval_envs),
        ("--n-seeds", 1 if request.n_seeds is None else request.n_seeds),
    ):
        positive_int(value, name)
    check_eval_episodes(request.eval_episodes, request.n_seeds or 1)
    if request.keep_checkpoints < 0:
        raise ConfigError(
            f"--keep-checkpoints: expected a non-negative integer (0 keeps all), got {request.keep_checkpoints}"
        )
    if request.seed > MAX_SEED:
        raise ConfigError(
            f"--seed {request.seed} is too large: seeds are in [0, 2**32-1] (as SB3 and RL Zoo), "
            "or negative to draw one"
        )
    check_log_folder(request.log_folder)


# The device loop counts an evaluation's episodes, and places their results, in int32.
MAX_EVAL_EPISODES = 2**31 - 1
# What an evaluation keeps of each episode of each seed: its return and length in float32 and int32 on the
# device, then float64 and int64 on the host (evaluations.npz, as RL Zoo's).
EVAL_BYTES_PER_EPISODE = 4 + 4 + 8 + 8


def check_eval_episodes(eval_episodes: int, n_seeds: int) -> None:
    """Refuse an episode count one evaluation cannot hold (an evaluation of more than fits would fail after
    training started, or, on the device, run in memory for as long as it ran)."""
    if eval_episodes > MAX_EVAL_EPISODES:
        raise ConfigError(
            f"--eval-episodes {eval_episodes}: at most {MAX_EVAL_EPISODES:,} (2**31-1): the device loop counts "
            "an evaluation's episodes in int32"
        )
    needed, available = eval_episodes * n_seeds * EVAL_BYTES_PER_EPISODE, available_memory_bytes()
    if available is not None and needed > available:
        seeds = f" x {n_seeds} seeds" if n_seeds > 1 else ""
        raise ConfigError(
            f"--eval-episodes {eval_episodes}: an evaluation keeps each episode's return and length "
            f"({EVAL_BYTES_PER_EPISODE} B{seeds}: {needed / 2**30:.2f} GiB) but only {available / 2**30:.2f} GiB "
            "is available; an evaluation averages a few episodes (5 by default, as RL Zoo)"
        )


def spaces_spec(spaces: Mapping[str, Any]) -> EnvSpec:
    """The EnvSpec of spaces as describe_space records them, read as a manifest's are (Spaces.spec)."""
    return Spaces.from_json(spaces).spec


def describe_space(space: gym.spaces.Box) -> SpaceRecord:
    """The space's JSON record; an image's shape is its own [height, width, channels] (rlbench.envs.images)."""
    return {
        "shape": list(recorded_shape(space)),
        "dtype": str(space.dtype),
        "low": np.asarray(space.low, np.float64).ravel().tolist(),
        "high": np.asarray(space.high, np.float64).ravel().tolist(),
    }


def check_log_folder(log_folder: str) -> None:
    """`-f` must be a folder this process can create run folders in (checked before anything is created)."""
    path = Path(log_folder)
    existing = path
    while not existing.exists():  # the nearest existing ancestor is where the folders will be created
        existing = existing.parent
    if not existing.is_dir():
        raise ConfigError(f"-f/--log-folder {log_folder}: {existing} is a file, not a folder")
    if not os.access(existing, os.W_OK | os.X_OK):  # also false on a read-only file system (EROFS)
        raise ConfigError(
            f"-f/--log-folder {log_folder}: cannot create folders in {existing} (read-only or no "
            "write permission); choose another log folder with -f"
        )
