"""Run resolution: from a typed request to a checked `Experiment`, before anything is written.

Below the command line: train.py builds a `RunRequest` from its flags (as `bench returns` does for each grid
cell), Optuna trials (rlbench.tuning) derive theirs from it with `dataclasses.replace`, and all of them resolve
it here. Resolution applies the JAX device, imports the gym packages, reads the hyperparameter file, a
checkpoint to resume (`-i`) or an Optuna trial (`--trial-id`), builds and steps a probe env and sizes the
learner; a problem raises ConfigError (exit 2) or CheckpointError (exit 1) before any folder or file exists.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jax
import numpy as np

from rlbench.algos.common.algorithm import Algorithm
from rlbench.algos.common.spelling import literal_mapping, positive_int
from rlbench.algos.registry import get_algo
from rlbench.config import hyperparams
from rlbench.config.entry import (
    RunConfig,
    buffer_notes,
    normalize_entry,
    normalize_to_entry,
    parse_normalize,
    parse_stats_window_size,
    split_entry,
    wrappers_to_entry,
)
from rlbench.config.literals import LiteralError, parse_key_values
from rlbench.envs.make import check_env_id, check_env_runs, env_file_name
from rlbench.envs.wrappers import trusted_modules
from rlbench.errors import ConfigError
from rlbench.run.memory import buffer_summary, check_buffer_memory, check_learner_memory, check_open_files
from rlbench.run.resume import (
    check_resume_evaluations,
    check_resume_normalize,
    check_resume_overrides,
    check_resume_state,
    check_spaces,
    load_resume_checkpoint,
    resume_group,
)
from rlbench.store.checkpoint import Checkpoint
from rlbench.store.schema import MAX_SEED
from rlbench.types import EnvSpec


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
    vec_env: str = "dummy"
    eval_freq: int = 25_000
    eval_episodes: int = 5
    n_eval_envs: int = 1
    log_interval: int = -1  # -1: every 4 episodes; < -1: never
    verbose: int = 1
    progress: bool = False
    trial_id: int | None = None
    storage: str | None = None  # None: <log_folder>/<algo>/optuna_<env>.log
    study_name: str | None = None  # None: <algo>_<env>


DEVICE_KINDS = ("auto", "cpu", "gpu", "cuda")  # and gpu:N / cuda:N, the N-th GPU


def split_device(device: str) -> tuple[str, int | None]:
    """`--device` as (kind, GPU index or None); ValueError for anything but DEVICE_KINDS and gpu:N / cuda:N."""
    kind, colon, index = device.partition(":")
    if kind not in DEVICE_KINDS or (colon and (kind not in ("gpu", "cuda") or not index.isdigit())):
        raise ValueError(f"expected auto, cpu, gpu, cuda, gpu:N or cuda:N, got {device!r}")
    return kind, int(index) if colon else None


def device_flag(text: str) -> str:
    """argparse's type for --device (train.py, enjoy.py, the sweep): the text, checked by split_device."""
    try:
        split_device(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None
    return text


def select_device(device: str, num_threads: int) -> None:
    """Apply --device and --num-threads before JAX starts its backend; exit 2 for a missing GPU. `gpu:N`
    makes the N-th GPU JAX's default device: every array and computation of this process goes there."""
    if num_threads == 1:
        os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " --xla_cpu_multi_thread_eigen=false").strip()
    kind, index = split_device(device)
    if kind == "cpu":
        jax.config.update("jax_platforms", "cpu")
    elif kind in ("gpu", "cuda"):
        try:
            gpus = jax.devices("gpu")
        except RuntimeError:
            found = ", ".join(str(d) for d in jax.devices())
            raise ConfigError(
                f"--device {device}: no GPU found (devices: {found}); install rlbench[cuda] "
                "on a machine with an NVIDIA GPU, or use --device cpu/auto"
            ) from None
        if index is not None and index >= len(gpus):
            raise ConfigError(
                f"--device {device}: there is no GPU {index}; found {len(gpus)} "
                f"({', '.join(str(gpu) for gpu in gpus)}): use gpu:0 to gpu:{len(gpus) - 1}"
            )
        jax.config.update("jax_platforms", "cuda")
        if index is not None:
            jax.config.update("jax_default_device", gpus[index])


def check_trial_entry(
    algo: Algorithm, base: Mapping[str, Any], trial: Mapping[str, Any], name: str, trusted: Any
) -> None:
    """ConfigError naming the stored trial (`name`) when its hyperparameters make a valid entry invalid. An
    entry that is invalid without them is left to the checks that name the file."""

    def build(entry: Mapping[str, Any], where: str) -> None:
        run_keys, _, learner_keys = split_entry(entry, where, trusted)
        algo.build_config(learner_keys, positive_int(run_keys.get("n_envs", 1), "n_envs"), where)

    try:
        build(base, "the file")
    except ConfigError:
        return
    where = f"the hyperparameters stored with {name}"
    try:
        build(hyperparams.merge(base, normalize_entry(dict(trial), where)), where)
    except ConfigError as error:
        raise ConfigError(f"{name}: the trial's stored hyperparameters are invalid: {error}") from None


@dataclass(frozen=True)
class Experiment:
    """Everything a run needs, resolved and checked, before anything is written."""

    algo: Algorithm
    run: RunConfig
    learner_config: Any
    hyperparams: dict[str, Any]  # resolved, file spelling (saved as config.yml)
    spaces: dict[str, Any]  # the env's observation and action spaces, as the manifest records them
    resume: Checkpoint | None = None  # the checkpoint -i named
    seeds: tuple[int, ...] = ()  # run.seed, run.seed + 1, ...: one learner each, trained together
    resume_seeds: tuple[Checkpoint, ...] = ()  # when resuming: one checkpoint per seed (`resume` among them)
    group_id: str | None = None  # the id of a run of several seeds (W&B group, manifests), kept on resume

    @property
    def n_seeds(self) -> int:
        return len(self.seeds)


# --trial-id's source of a stored trial: (its hyperparameters, its seed) from the request and the env's file
# name. The front end that reads studies passes it (rlbench.tuning.study.load_trial), so that resolving a
# run never imports the tuning front end.
TrialLoader = Callable[[RunRequest, str], tuple[dict[str, Any], int | None]]


def resolve(
    request: RunRequest, trial_overrides: Mapping[str, Any] | None = None, load_trial: TrialLoader | None = None
) -> Experiment:
    """Validate the request, its files and hyperparameters; raise ConfigError on the first problem.

    `trial_overrides` (an Optuna trial's hyperparameters) sit between the file entry and -params;
    with `trial_id`, `load_trial` supplies them from the study."""
    if request.num_threads not in (-1, 1):
        raise ConfigError(
            f"--num-threads: only -1 (XLA's default) or 1 (single-threaded) are supported, "
            f"got {request.num_threads}; XLA sizes its CPU thread pool itself"
        )
    select_device(request.device, request.num_threads)  # before anything starts a JAX backend
    algo = get_algo(request.algo)
    for module in request.gym_packages:
        try:
            importlib.import_module(module)
        except ImportError as error:
            raise ConfigError(f"--gym-packages: cannot import {module!r} ({error})") from None
    check_env_id(request.env)
    resume = load_resume_checkpoint(Path(request.trained_agent), algo) if request.trained_agent else None
    if resume is not None:
        source = str(resume.path)  # the saved, resolved hyperparameters; the file is not read
        base = dict(resume.manifest.run.hyperparams)
    else:
        source = request.conf_file or str(hyperparams.default_file(algo.name))
        entry = normalize_entry(
            hyperparams.select_entry(hyperparams.read_file(source), request.env, source, request.verbose), source
        )
        base = hyperparams.merge(algo.preset, entry)
    trial_seed = None
    if trial_overrides is None and request.trial_id is not None:
        if load_trial is None:
            raise ConfigError(f"--trial-id {request.trial_id}: this command does not read Optuna studies")
        trial_overrides, trial_seed = load_trial(request, env_file_name(request.env))  # as -optimize names its study
    if trial_overrides and request.trial_id is not None:  # a stored trial's values: untrusted, named as such
        trusted = trusted_modules([*request.gym_packages, *request.trust_wrappers])
        check_trial_entry(algo, base, trial_overrides, f"--trial-id {request.trial_id}", trusted)
    if trial_overrides:
        base = hyperparams.merge(base, normalize_entry(dict(trial_overrides), "the Optuna trial"))
    try:
        overrides = normalize_entry(parse_key_values(request.params, "-params"), "-params")
        env_kwargs_cli = parse_key_values(request.env_kwargs, "--env-kwargs")
        eval_env_kwargs_cli = (
            None if request.eval_env_kwargs is None else parse_key_values(request.eval_env_kwargs, "--eval-env-kwargs")
        )
    except LiteralError as error:
        raise ConfigError(str(error)) from None
    merged = hyperparams.merge(base, overrides)
    where = f"{source} / -params" if request.params else source
    run_keys, env_wrappers, learner_keys = split_entry(
        merged, where, trusted_modules([*request.gym_packages, *request.trust_wrappers])
    )
    n_envs = positive_int(run_keys.get("n_envs", 1), "n_envs")
    stats_window_size = parse_stats_window_size(run_keys)
    notes = buffer_notes(run_keys, where)
    n_timesteps = request.n_timesteps if request.n_timesteps != -1 else run_keys.get("n_timesteps")
    if n_timesteps is None:
        raise ConfigError(f"n_timesteps is not set in {source} for {request.env}; pass -n N")
    from_checkpoint = resume is not None and request.n_timesteps == -1 and "n_timesteps" not in overrides
    n_timesteps_name = f"n_timesteps saved in {resume.path}" if from_checkpoint else "n_timesteps (-n)"
    if resume is not None and request.n_timesteps != -1:
        # As SB3's learn(reset_num_timesteps=False): -n counts the steps to add to the checkpoint's.
        saved_steps = resume.manifest.counters.env_steps
        n_timesteps = saved_steps + positive_int(request.n_timesteps, "-n")
        n_timesteps_name = f"n_timesteps ({saved_steps} env steps saved in {resume.path} + -n {request.n_timesteps})"
    n_timesteps = positive_int(n_timesteps, n_timesteps_name)
    learner_config = algo.build_config(learner_keys, n_envs, where)
    # A resumed entry is resolved already: its normalize gamma is final (RL Zoo's rule applied once, below).
    algo_gamma = learner_config.gamma if resume is None and "gamma" in learner_keys else None
    normalize = parse_normalize(run_keys.get("normalize"), algo_gamma, where)
    if resume is not None:
        check_resume_normalize(resume, normalize, parse_normalize(base.get("normalize"), None, str(resume.path)))
        check_resume_overrides(resume, base, merged, algo.config_to_hyperparams(learner_config))
    file_env_kwargs = literal_mapping(run_keys.get("env_kwargs"), "env_kwargs")
    env_kwargs = file_env_kwargs | env_kwargs_cli
    # Unlike RL Zoo, the file's env_kwargs reach the evaluation env too, unless --eval-env-kwargs is given.
    eval_env_kwargs = env_kwargs if eval_env_kwargs_cli is None else file_env_kwargs | eval_env_kwargs_cli
    for name, value in (
        ("--eval-episodes", request.eval_episodes),
        ("--n-eval-envs", request.n_eval_envs),
        ("--n-seeds", 1 if request.n_seeds is None else request.n_seeds),
    ):
        positive_int(value, name)
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
    # One env built, reset and stepped with each set of kwargs: what the env rejects is refused now, not
    # at the first step or the first evaluation (after training).
    obs_space, action_space = check_env_runs(
        request.env, env_kwargs, env_wrappers, request.gym_packages, "--env-kwargs / env_kwargs"
    )
    spaces = {"observation": describe_space(obs_space), "action": describe_space(action_space)}
    if request.eval_freq > 0 and eval_env_kwargs != env_kwargs:
        check_env_runs(request.env, eval_env_kwargs, env_wrappers, request.gym_packages, "--eval-env-kwargs")
    spec = EnvSpec(int(np.prod(spaces["observation"]["shape"])), int(np.prod(spaces["action"]["shape"])))
    resume_seeds = resume_group(resume, request.n_seeds, algo) if resume is not None else ()
    n_seeds = len(resume_seeds) if resume is not None else (request.n_seeds or 1)
    if learner_config.train_freq_unit == "episode" and n_seeds > 1:
        raise ConfigError(
            f"train_freq: {learner_config.train_freq} episode(s) with --n-seeds {n_seeds}: each seed would train at "
            "its own episode ends, and the seeds of one process train together; train one seed per process"
        )
    check_open_files(n_seeds, n_envs, request.vec_env)
    check_buffer_memory(learner_config.buffer_size, spec, 0, n_seeds)  # its line is printed below, after the checks
    check_learner_memory(algo, learner_config, spec, n_seeds)
    for checkpoint in resume_seeds:
        check_spaces(checkpoint, spaces, request.allow_space_bounds_mismatch, request.env)
        check_resume_state(checkpoint, algo, learner_config, spaces, normalize)
        if request.eval_freq > 0:
            check_resume_evaluations(checkpoint, request.eval_episodes)
    group_id = None
    if resume is not None:
        seed = resume_seeds[0].manifest.run.seed  # every RNG continues from the checkpoints
        if request.seed >= 0 and request.seed != seed and request.verbose:
            print(f"Note: --seed {request.seed} ignored; the run continues the checkpoint's seed {seed}")
        if n_seeds > 1:
            group_id = resume.manifest.run.group.id
    elif request.seed < 0 and trial_seed is not None:
        seed = int(trial_seed)  # --trial-id without --seed: the trial's own seed, so its scores reproduce
    else:
        seed = request.seed if request.seed >= 0 else int(np.random.default_rng().integers(2**31 - n_seeds))
    if seed + n_seeds - 1 > MAX_SEED:
        raise ConfigError(
            f"--seed {seed} with --n-seeds {n_seeds}: the last seed {seed + n_seeds - 1} is too large; "
            "seeds are in [0, 2**32-1]"
        )
    if resume is None and n_seeds > 1:
        group_id = (
            f"{request.algo}_{env_file_name(request.env)}_seeds{seed}-{seed + n_seeds - 1}_{uuid.uuid4().hex[:8]}"
        )
    run = RunConfig(
        env_id=request.env,
        n_timesteps=n_timesteps,
        n_envs=n_envs,
        env_kwargs=env_kwargs,
        seed=seed,
        eval_env_kwargs=eval_env_kwargs,
        env_wrappers=env_wrappers,
        gym_packages=tuple(request.gym_packages),
        vec_env=request.vec_env,
        eval_freq=request.eval_freq,
        eval_episodes=request.eval_episodes,
        n_eval_envs=request.n_eval_envs,
        log_interval=4 if request.log_interval == -1 else request.log_interval,
        verbose=request.verbose,
        progress=request.progress,
        normalize=normalize,
        stats_window_size=stats_window_size,
    )
    if request.verbose:
        print(buffer_summary(learner_config.buffer_size, spec, n_seeds))
        for note in notes:
            print(note)
    if n_timesteps <= learner_config.learning_starts:  # last: no error can follow this line
        print(
            f"Warning: n_timesteps {n_timesteps} <= learning_starts {learner_config.learning_starts}: this run takes "
            "random actions only and no gradient step; raise -n or lower learning_starts (-params)",
            file=sys.stderr,
        )
    resolved = {
        "n_timesteps": n_timesteps,
        "n_envs": n_envs,
        "policy": "MlpPolicy",
        "env_kwargs": env_kwargs,
        "stats_window_size": stats_window_size,
        **wrappers_to_entry(env_wrappers),
        **({"normalize": normalize_to_entry(normalize)} if normalize is not None else {}),
        **algo.config_to_hyperparams(learner_config),
    }
    return Experiment(
        algo=algo,
        run=run,
        learner_config=learner_config,
        hyperparams=dict(sorted(resolved.items())),
        spaces=spaces,
        resume=resume,
        seeds=tuple(seed + index for index in range(n_seeds)),
        resume_seeds=resume_seeds,
        group_id=group_id,
    )


def describe_space(space: Any) -> dict[str, Any]:
    return {
        "shape": list(space.shape),
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
