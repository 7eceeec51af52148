"""Run resolution: from a typed request to a checked `Experiment`, before anything is written.

Every front end builds a `RunRequest` (rlbench.run.request) and resolves it here: `resolve` goes through
the stages of a run in order, each checking what it reads, so the first problem is the one reported:
the process (the JAX device, --gym-packages, the env id); the hyperparameter entry and its layers
(rlbench.run.entry_layers: a file, or the checkpoint `-i` resumes, an Optuna trial, -params); the learner's
config and the run's length; the envs, built and stepped once (rlbench.run.probe); the seeds, with the
memory they need and the checkpoints they resume. A problem raises ConfigError (exit 2) or
CheckpointError (exit 1) before any folder or file exists.
"""

from __future__ import annotations

import importlib
import sys
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from rlbench.algos.common.config import LearnerConfig, ReplayConfig
from rlbench.algos.common.learner import Learner
from rlbench.buffers.normalization import NormalizeConfig
from rlbench.config.algorithm import Algorithm
from rlbench.config.entry import (
    RunConfig,
    buffer_notes,
    normalize_to_entry,
    parse_normalize,
    parse_stats_window_size,
    split_entry,
    wrappers_to_entry,
)
from rlbench.config.registry import acting_in, get_algo, reading_images
from rlbench.config.values import positive_int
from rlbench.envs.checks import check_env_id
from rlbench.envs.envpool_atari import pool_kwargs
from rlbench.envs.envpool_vector import check_pool_memory, envpool_env_id, is_envpool
from rlbench.envs.jax_native.ids import is_jax_native
from rlbench.envs.make import env_file_name
from rlbench.envs.wrappers import EnvWrapper
from rlbench.errors import ConfigError
from rlbench.loop.device.envs import steps_on_device
from rlbench.loop.device.runner import device_loop_refusal
from rlbench.loop.device.start import check_saved_envs
from rlbench.run.device import select_device
from rlbench.run.entry_layers import Layers, TrialLoader, checked_in_layers, entry_layers, trusted
from rlbench.run.memory import (
    available_memory_bytes,
    buffer_summary,
    check_buffer_memory,
    check_learner_memory,
    check_open_files,
)
from rlbench.run.probe import Envs, SpaceRecord, probe_envs, spaces_spec
from rlbench.run.request import RunRequest
from rlbench.run.resume import (
    check_resume_evaluations,
    check_resume_normalize,
    check_resume_overrides,
    check_resume_state,
    check_spaces,
    load_resume_checkpoint,
    resume_group,
    resume_path,
)
from rlbench.store.checkpoint import Checkpoint
from rlbench.store.schema import MAX_SEED
from rlbench.types import EnvSpec


@dataclass(frozen=True)
class Experiment:
    """Everything a run needs, resolved and checked, before anything is written."""

    algo: Algorithm
    run: RunConfig
    learner_config: LearnerConfig
    hyperparams: dict[str, Any]  # resolved, file format (saved as config.yml)
    spaces: dict[str, SpaceRecord]  # the env's observation and action spaces, as the manifest records them
    resume: Checkpoint | None = None  # the checkpoint -i named
    seeds: tuple[int, ...] = ()  # run.seed, run.seed + 1, ...: one learner each, trained together
    resume_seeds: tuple[Checkpoint, ...] = ()  # when resuming: one checkpoint per seed (`resume` among them)
    group_id: str | None = None  # the id of a run of several seeds (W&B group, manifests), kept on resume
    source: str = ""  # where the hyperparameters come from: the file, the checkpoint resumed, a benchmark's entry

    @property
    def n_seeds(self) -> int:
        return len(self.seeds)

    @property
    def env_spec(self) -> EnvSpec:
        return spaces_spec(self.spaces)


def resolve(
    request: RunRequest, trial_overrides: Mapping[str, Any] | None = None, load_trial: TrialLoader | None = None
) -> Experiment:
    """Validate the request, its files and hyperparameters; raise ConfigError on the first problem.

    `trial_overrides` (an Optuna trial's hyperparameters) sit between the file entry and -params;
    with `trial_id`, `load_trial` supplies them from the study. The stages run in this order, each
    checking what it reads, so the first problem in the order of a run is the one reported."""
    algo = prepare_process(request)
    resume = load_resume_checkpoint(resume_path(Path(request.trained_agent)), algo) if request.trained_agent else None
    layers = entry_layers(request, algo, resume, trial_overrides, load_trial)
    learner = learner_settings(request, algo, layers)
    envs = probe_envs(request, learner.run_keys, learner.env_wrappers)
    seeds = seed_settings(request, algo, layers, learner, envs)
    return experiment(request, algo, layers, learner, envs, seeds)


def prepare_process(request: RunRequest) -> Algorithm:
    """The device (before anything starts a JAX backend), the algorithm, --gym-packages and the env id."""
    algo = get_algo(request.algo)
    select_device(request.device, request.num_threads, inline_cpu_calls=algo.inline_cpu_calls)
    for module in request.gym_packages:
        try:
            importlib.import_module(module)
        except ImportError as error:
            raise ConfigError(f"--gym-packages: cannot import {module!r} ({error})") from None
    if is_envpool(request.env) and request.vec_env == "subproc":
        raise ConfigError(f"--vec-env subproc: {request.env} steps in EnvPool's own threads; drop --vec-env")
    if is_jax_native(request.env) and request.vec_env.startswith("envpool"):
        raise ConfigError(f"--vec-env {request.vec_env}: {request.env} is a JAX-native env, not EnvPool's; drop it")
    check_env_id(envpool_env_id(request.env, request.vec_env))
    return algo


@dataclass(frozen=True)
class LearnerSettings:
    """The entry split into the run's keys, the env's wrappers and the learner's config."""

    where: str  # the entry's source, as errors name it
    run_keys: dict[str, Any]
    env_wrappers: tuple[EnvWrapper, ...]
    learner_config: LearnerConfig
    n_envs: int
    n_timesteps: int
    normalize: NormalizeConfig | None
    stats_window_size: int
    notes: tuple[str, ...]  # buffer notes, printed once every check has passed


def learner_settings(request: RunRequest, algo: Algorithm, layers: Layers) -> LearnerSettings:
    return checked_in_layers(layers, lambda entry, where: entry_settings(request, algo, layers, entry, where))


def entry_settings(
    request: RunRequest, algo: Algorithm, layers: Layers, entry: Mapping[str, Any], where: str
) -> LearnerSettings:
    """The settings of `entry`: the merged layers (or, to find the layer at fault, the base alone)."""
    run_keys, env_wrappers, learner_keys = split_entry(entry, where, trusted(request))
    n_envs = positive_int(run_keys.get("n_envs", 1), "n_envs")
    stats_window_size = parse_stats_window_size(run_keys)
    notes = tuple(buffer_notes(run_keys, where))
    n_timesteps = run_length(request, layers, run_keys)
    learner_config = algo.build_config(learner_keys, n_envs, where)
    resume = layers.resume
    # A resumed entry is resolved already: its normalize gamma is final (RL Zoo's rule applied once, below).
    algo_gamma = learner_config.gamma if resume is None and "gamma" in learner_keys else None
    normalize = parse_normalize(run_keys.get("normalize"), algo_gamma, where)
    if resume is not None:
        saved_normalize = parse_normalize(layers.base.get("normalize"), None, str(resume.path))
        check_resume_normalize(resume, normalize, saved_normalize)
        check_resume_overrides(algo, resume, layers.base, layers.merged, algo.config_to_hyperparams(learner_config))
    return LearnerSettings(
        where, run_keys, env_wrappers, learner_config, n_envs, n_timesteps, normalize, stats_window_size, notes
    )


def run_length(request: RunRequest, layers: Layers, run_keys: Mapping[str, Any]) -> int:
    """n_timesteps: -n, else the entry's; on resume, -n counts the steps to add to the checkpoint's (as SB3's
    learn(reset_num_timesteps=False))."""
    n_timesteps = request.n_timesteps if request.n_timesteps != -1 else run_keys.get("n_timesteps")
    if n_timesteps is None:
        raise ConfigError(f"n_timesteps is not set in {layers.source} for {request.env}; pass -n N")
    resume = layers.resume
    from_checkpoint = resume is not None and request.n_timesteps == -1 and "n_timesteps" not in layers.overrides
    name = f"n_timesteps saved in {resume.path}" if from_checkpoint and resume is not None else "n_timesteps (-n)"
    if resume is not None and request.n_timesteps != -1:
        saved_steps = resume.manifest.counters.env_steps
        n_timesteps = saved_steps + positive_int(request.n_timesteps, "-n")
        name = f"n_timesteps ({saved_steps} env steps saved in {resume.path} + -n {request.n_timesteps})"
    return positive_int(n_timesteps, name)


@dataclass(frozen=True)
class Seeds:
    seeds: tuple[int, ...]  # the first seed, +1, ...: one learner each, trained together
    resume_seeds: tuple[Checkpoint, ...]
    group_id: str | None


def seed_settings(request: RunRequest, algo: Algorithm, layers: Layers, learner: LearnerSettings, envs: Envs) -> Seeds:
    """The seeds (a resumed group's, or --n-seeds from --seed), checked to fit this machine and, on resume,
    the checkpoints; then the first seed and a group's id."""
    resume, config = layers.resume, learner.learner_config
    resume_seeds = resume_group(resume, request.n_seeds, algo) if resume is not None else ()
    n_seeds = len(resume_seeds) if resume is not None else (request.n_seeds or 1)
    built = check_learner_fits(request, algo, learner, envs, n_seeds)
    check_open_files(n_seeds, learner.n_envs, request.vec_env)
    if is_envpool(pool_id := envpool_env_id(request.env, request.vec_env)):
        n_eval_envs = request.n_eval_envs if request.eval_freq > 0 else 0
        kwargs = pool_kwargs(pool_id, learner.env_wrappers, envs.env_kwargs)  # Atari's wrappers as pool options
        check_pool_memory(pool_id, kwargs, n_seeds * (learner.n_envs + n_eval_envs), available_memory_bytes())
    check_buffer_memory(built.storage.replay_capacity, envs.spec, 0, n_seeds)  # its line is printed after the checks
    check_learner_memory(built, envs.spec, n_seeds)
    for checkpoint in resume_seeds:
        check_spaces(checkpoint, envs.spaces, request.allow_space_bounds_mismatch, request.env)
        check_resume_state(checkpoint, algo, config, envs.spaces, learner.normalize)
        if request.eval_freq > 0:
            check_resume_evaluations(checkpoint, request.eval_episodes)
    if is_jax_native(request.env) and resume_seeds:
        check_saved_envs(request.env, envs.env_kwargs, learner.n_envs, resume_seeds)
    seed = first_seed(request, resume_seeds, layers.trial_seed, n_seeds)
    group_id = None
    if resume is not None and n_seeds > 1:
        group = resume.manifest.run.group
        assert group is not None, "a resume of several seeds is a group's (resume_group)"
        group_id = group.id
    elif n_seeds > 1:
        seed_range = f"seeds{seed}-{seed + n_seeds - 1}"
        group_id = f"{request.algo}_{env_file_name(request.env)}_{seed_range}_{uuid.uuid4().hex[:8]}"
    return Seeds(tuple(seed + index for index in range(n_seeds)), resume_seeds, group_id)


def check_learner_fits(
    request: RunRequest, algo: Algorithm, learner: LearnerSettings, envs: Envs, n_seeds: int
) -> Learner[Any]:
    """The learner (its sizes and schedule; nothing traced), once its settings fit the env, the loop and the
    seeds: the action space it acts in, `normalize`, train_freq in episodes, the device loop's limits."""
    config = learner.learner_config
    space = "Discrete" if envs.spec.discrete else "Box"
    if space not in algo.action_spaces:
        raise ConfigError(
            f"--env {request.env} has a {space} action space, and --algo {algo.name} acts in "
            f"{' and '.join(algo.action_spaces)} spaces only; algorithms for {space} actions: "
            f"{', '.join(acting_in(space))}"
        )
    check_observations(request.env, algo, envs.spec, learner.normalize is not None)
    built = algo.make_learner(config, envs.spec)  # what it stores and when it trains, not its programs
    if built.collection.per_episode and n_seeds > 1:
        assert isinstance(config, ReplayConfig), "only off-policy learners train at episode ends"
        raise ConfigError(
            f"train_freq: {config.train_freq} episode(s) with --n-seeds {n_seeds}: each seed would train at "
            "its own episode ends, and the seeds of one process train together; train one seed per process"
        )
    if steps_on_device(request.env, request.vec_env):
        refusal = device_loop_refusal(
            request.vec_env, learner.normalize, learner.env_wrappers, built.collection, config
        )
        if refusal is not None:
            raise ConfigError(f"{refusal} (--env {request.env} trains with the device loop)")
    return built


def check_observations(env: str, algo: Algorithm, spec: EnvSpec, normalize: bool) -> None:
    """Image observations reach only the algorithms that read them, and are scaled by 255, not by `normalize`'s
    running statistics (the learner checks that its policy fits the image: Features.refusal)."""
    if not spec.image_shape:
        return
    image = f"uint8 {list(spec.image_shape)}"
    if not algo.reads_images:
        raise ConfigError(
            f"--env {env} observes images ({image}), and --algo {algo.name} reads flat vector observations only; "
            f"algorithms for images: {', '.join(reading_images())}"
        )
    if normalize:
        raise ConfigError(
            f"normalize: --env {env} observes images ({image}), which the networks scale by 255 (as SB3's); "
            "running statistics would undo that: drop normalize"
        )


def first_seed(request: RunRequest, resume_seeds: tuple[Checkpoint, ...], trial_seed: int | None, n_seeds: int) -> int:
    """A resumed run's saved seed (every RNG continues from the checkpoints), --trial-id's own seed when no
    --seed is given (so its scores reproduce), --seed, or one drawn; the last seed must fit in 32 bits."""
    if resume_seeds:
        seed = resume_seeds[0].manifest.run.seed
        if request.seed >= 0 and request.seed != seed and request.verbose:
            print(f"Note: --seed {request.seed} ignored; the run continues the checkpoint's seed {seed}")
    elif request.seed < 0 and trial_seed is not None:
        seed = int(trial_seed)
    else:
        seed = request.seed if request.seed >= 0 else int(np.random.default_rng().integers(2**31 - n_seeds))
    if seed + n_seeds - 1 > MAX_SEED:
        raise ConfigError(
            f"--seed {seed} with --n-seeds {n_seeds}: the last seed {seed + n_seeds - 1} is too large; "
            "seeds are in [0, 2**32-1]"
        )
    return seed


def experiment(
    request: RunRequest, algo: Algorithm, layers: Layers, learner: LearnerSettings, envs: Envs, seeds: Seeds
) -> Experiment:
    """The checked settings as an Experiment; the buffer's size and notes printed (no error can follow)."""
    config = learner.learner_config
    built = algo.make_learner(config, envs.spec)
    replay_capacity, collection = built.storage.replay_capacity, built.collection
    if request.verbose:
        if replay_capacity:
            print(buffer_summary(replay_capacity, envs.spec, len(seeds.seeds)))
        for note in learner.notes:
            print(note)
    if learner.n_timesteps <= collection.learning_starts:
        print(
            f"Warning: n_timesteps {learner.n_timesteps} <= learning_starts {collection.learning_starts}: this run "
            "takes random actions only and no gradient step; raise -n or lower learning_starts (-params)",
            file=sys.stderr,
        )
    rollout = collection.vector_steps_per_update * learner.n_envs
    if not replay_capacity and learner.n_timesteps < rollout:
        print(
            f"Warning: n_timesteps {learner.n_timesteps} < one rollout (n_steps x n_envs = {rollout}): this run "
            "collects no full rollout and takes no gradient step; raise -n or lower n_steps (-params)",
            file=sys.stderr,
        )
    return Experiment(
        algo=algo,
        run=run_config(request, algo, learner, envs, seeds.seeds[0]),
        learner_config=config,
        hyperparams=resolved_hyperparams(algo, learner, envs),
        spaces=envs.spaces,
        resume=layers.resume,
        seeds=seeds.seeds,
        resume_seeds=seeds.resume_seeds,
        group_id=seeds.group_id,
        source=layers.source,
    )


def run_config(request: RunRequest, algo: Algorithm, learner: LearnerSettings, envs: Envs, seed: int) -> RunConfig:
    return RunConfig(
        env_id=request.env,
        n_timesteps=learner.n_timesteps,
        n_envs=learner.n_envs,
        env_kwargs=envs.env_kwargs,
        seed=seed,
        eval_env_kwargs=envs.eval_env_kwargs,
        env_wrappers=learner.env_wrappers,
        gym_packages=tuple(request.gym_packages),
        vec_env=request.vec_env,
        eval_freq=request.eval_freq,
        eval_episodes=request.eval_episodes,
        n_eval_envs=request.n_eval_envs,
        log_interval=algo.log_interval if request.log_interval == -1 else request.log_interval,
        verbose=request.verbose,
        progress=request.progress,
        normalize=learner.normalize,
        stats_window_size=learner.stats_window_size,
    )


def resolved_hyperparams(algo: Algorithm, learner: LearnerSettings, envs: Envs) -> dict[str, Any]:
    """The resolved entry in the file's format, sorted (config.yml, the manifest, W&B)."""
    resolved = {
        "n_timesteps": learner.n_timesteps,
        "n_envs": learner.n_envs,
        "env_kwargs": envs.env_kwargs,
        "stats_window_size": learner.stats_window_size,
        **wrappers_to_entry(learner.env_wrappers),
        **({"normalize": normalize_to_entry(learner.normalize)} if learner.normalize is not None else {}),
        **algo.config_to_hyperparams(learner.learner_config),
    }
    return dict(sorted(resolved.items()))
