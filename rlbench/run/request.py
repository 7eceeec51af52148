"""The typed request every front end builds: what a run asks for, before anything is checked.

train.py builds one from its flags, a sweep's cell from its grid cell (rlbench.sweep), an -optimize trial
from the study's with `dataclasses.replace` (rlbench.tuning), a `bench speed` row from its case
(rlbench.bench); rlbench.run.experiment.resolve checks it and turns it into an Experiment.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from rlbench.types import VecEnvKind


@dataclass(frozen=True)
class RunRequest:
    """What a run asks for, as train.py's flags spell it (the defaults are its defaults); nothing checked yet.

    The KEY:VALUE strings (`params`, `env_kwargs`, `eval_env_kwargs`) are parsed by `resolve`, which names
    the flag in its errors; `storage` and `study_name` locate the Optuna study of `trial_id` (and of -optimize).
    """

    algo: str = "sac"
    env: str = "Pendulum-v1"
    conf_file: str | None = None  # None: hyperparams/<algo>.yml
    params: tuple[str, ...] = ()  # -params KEY:VALUE, over the file entry
    env_kwargs: tuple[str, ...] = ()  # --env-kwargs KEY:VALUE, over the file's env_kwargs
    eval_env_kwargs: tuple[str, ...] | None = None  # None: the training env's kwargs
    n_timesteps: int = -1  # -1: the file's
    seed: int = -1  # < 0: drawn
    n_seeds: int | None = None  # seeds seed, seed+1, ... trained in one process; None: 1, or -i's whole group
    trained_agent: str = ""  # a checkpoint to resume; "" starts afresh
    allow_space_bounds_mismatch: bool = False
    log_folder: str = "logs"
    keep_checkpoints: int = 0
    device: str = "auto"
    num_threads: int = -1
    gym_packages: tuple[str, ...] = ()
    trust_wrappers: tuple[str, ...] = ()
    vec_env: VecEnvKind = "dummy"
    eval_freq: int = 25_000
    eval_episodes: int = 5
    n_eval_envs: int = 1
    log_interval: int = -1  # -1: the algorithm's (SB3's: 4 episodes off-policy, PPO 1 rollout, A2C 100); < -1: never
    verbose: int = 1
    progress: bool = False
    trial_id: int | None = None
    storage: str | None = None  # None: <log_folder>/<algo>/optuna_<env>.log
    study_name: str | None = None  # None: <algo>_<env>
    entry: Mapping[str, Any] | None = None  # the hyperparameters themselves, instead of a file's (bench speed)
