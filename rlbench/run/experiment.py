"""Run resolution: from a typed request to a checked `Experiment`, before anything is written.

Every front end builds a `RunRequest` (rlbench.run.request) and resolves it here: `resolve` goes through
the stages of a run in order, each checking what it reads, so the first problem is the one reported:
the process (the JAX device, --gym-packages, the env id); the hyperparameter entry and its layers
(rlbench.run.layers: a file, or the checkpoint `-i` resumes, an Optuna trial, -params); the learner's
config and the run's length; the envs, built and stepped once (rlbench.run.probe); the seeds, with the
memory they need and the checkpoints they resume. A problem raises ConfigError (exit 2) or
CheckpointError (exit 1) before any folder or file exists.
"""

from __future__ import annotations

import dataclasses
import importlib
import sys
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from rlbench.algos.common.algorithm import Algorithm
from rlbench.algos.common.spelling import positive_int
from rlbench.algos.registry import get_algo
from rlbench.buffers.normalization import NormalizeConfig
from rlbench.buffers.uniform import check_buffer_arrays
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
from rlbench.envs.make import check_env_id, env_file_name
from rlbench.envs.obs_normalizer import check_arrays, expected_shapes
from rlbench.errors import ConfigError
from rlbench.run.device import select_device
from rlbench.run.device import split_device as split_device  # moved to run/device.py; importable here too
from rlbench.run.layers import Layers, TrialLoader, entry_layers, trusted
from rlbench.run.memory import buffer_summary, check_buffer_memory, check_learner_memory, check_open_files
from rlbench.run.probe import Envs, probe_envs, spaces_spec
from rlbench.run.request import RunRequest
from rlbench.store.checkpoint import Checkpoint, check_state_fits, read_checkpoint, state_size_bound
from rlbench.store.schema import MAX_SEED, Expected, resume_expectations, space_sizes
from rlbench.types import EnvSpec

# Hyperparameters that shape the networks: a resumed run must keep them (the saved parameters fit no other).
ARCHITECTURE_KEYS = (
    "net_arch",
    "activation_fn",
    "dropout_rate",
    "layer_norm",
    "n_critics",
    "batch_norm",
    "batch_norm_actor",
)


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
    resume = load_resume_checkpoint(Path(request.trained_agent), algo) if request.trained_agent else None
    layers = entry_layers(request, algo, resume, trial_overrides, load_trial)
    learner = learner_settings(request, algo, layers)
    envs = probe_envs(request, learner.run_keys, learner.env_wrappers)
    seeds = seed_settings(request, algo, layers, learner, envs)
    return experiment(request, algo, layers, learner, envs, seeds)


def prepare_process(request: RunRequest) -> Algorithm:
    """The device (before anything starts a JAX backend), the algorithm, --gym-packages and the env id."""
    select_device(request.device, request.num_threads)
    algo = get_algo(request.algo)
    for module in request.gym_packages:
        try:
            importlib.import_module(module)
        except ImportError as error:
            raise ConfigError(f"--gym-packages: cannot import {module!r} ({error})") from None
    check_env_id(request.env)
    return algo


@dataclass(frozen=True)
class LearnerSettings:
    """The entry split into the run's keys, the env's wrappers and the learner's config."""

    where: str  # the entry's source, as errors name it
    run_keys: dict[str, Any]
    env_wrappers: tuple[Any, ...]
    learner_config: Any
    n_envs: int
    n_timesteps: int
    normalize: NormalizeConfig | None
    stats_window_size: int
    notes: tuple[str, ...]  # buffer notes, printed once every check has passed


def learner_settings(request: RunRequest, algo: Algorithm, layers: Layers) -> LearnerSettings:
    where = f"{layers.source} / -params" if request.params else layers.source
    run_keys, env_wrappers, learner_keys = split_entry(layers.merged, where, trusted(request))
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
        check_resume_overrides(resume, layers.base, layers.merged, algo.config_to_hyperparams(learner_config))
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
    name = f"n_timesteps saved in {resume.path}" if from_checkpoint else "n_timesteps (-n)"
    if resume is not None and request.n_timesteps != -1:
        saved_steps = resume.manifest["counters"]["env_steps"]
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
    if config.train_freq_unit == "episode" and n_seeds > 1:
        raise ConfigError(
            f"train_freq: {config.train_freq} episode(s) with --n-seeds {n_seeds}: each seed would train at "
            "its own episode ends, and the seeds of one process train together; train one seed per process"
        )
    check_open_files(n_seeds, learner.n_envs, request.vec_env)
    check_buffer_memory(config.buffer_size, envs.spec, 0, n_seeds)  # its line is printed last, after the checks
    check_learner_memory(algo, config, envs.spec, n_seeds)
    for checkpoint in resume_seeds:
        check_spaces(checkpoint, envs.spaces, request.allow_space_bounds_mismatch, request.env)
        check_resume_state(checkpoint, algo, config, envs.spaces, learner.normalize)
        if request.eval_freq > 0:
            check_resume_evaluations(checkpoint, request.eval_episodes)
    seed = first_seed(request, resume_seeds, layers.trial_seed, n_seeds)
    group_id = None
    if resume is not None and n_seeds > 1:
        group_id = resume.manifest["group"]["id"]
    elif n_seeds > 1:
        seed_range = f"seeds{seed}-{seed + n_seeds - 1}"
        group_id = f"{request.algo}_{env_file_name(request.env)}_{seed_range}_{uuid.uuid4().hex[:8]}"
    return Seeds(tuple(seed + index for index in range(n_seeds)), resume_seeds, group_id)


def first_seed(request: RunRequest, resume_seeds: tuple[Checkpoint, ...], trial_seed: int | None, n_seeds: int) -> int:
    """A resumed run's saved seed (every RNG continues from the checkpoints), --trial-id's own seed when no
    --seed is given (so its scores reproduce), --seed, or one drawn; the last seed must fit in 32 bits."""
    if resume_seeds:
        seed = int(resume_seeds[0].manifest["seed"])
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
    if request.verbose:
        print(buffer_summary(config.buffer_size, envs.spec, len(seeds.seeds)))
        for note in learner.notes:
            print(note)
    if learner.n_timesteps <= config.learning_starts:
        print(
            f"Warning: n_timesteps {learner.n_timesteps} <= learning_starts {config.learning_starts}: this run "
            "takes random actions only and no gradient step; raise -n or lower learning_starts (-params)",
            file=sys.stderr,
        )
    return Experiment(
        algo=algo,
        run=run_config(request, learner, envs, seeds.seeds[0]),
        learner_config=config,
        hyperparams=resolved_hyperparams(algo, learner, envs),
        spaces=envs.spaces,
        resume=layers.resume,
        seeds=seeds.seeds,
        resume_seeds=seeds.resume_seeds,
        group_id=seeds.group_id,
        source=layers.source,
    )


def run_config(request: RunRequest, learner: LearnerSettings, envs: Envs, seed: int) -> RunConfig:
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
        log_interval=4 if request.log_interval == -1 else request.log_interval,
        verbose=request.verbose,
        progress=request.progress,
        normalize=learner.normalize,
        stats_window_size=learner.stats_window_size,
    )


def resolved_hyperparams(algo: Algorithm, learner: LearnerSettings, envs: Envs) -> dict[str, Any]:
    """The resolved entry in the file's spelling, sorted (config.yml, the manifest, W&B)."""
    resolved = {
        "n_timesteps": learner.n_timesteps,
        "n_envs": learner.n_envs,
        "policy": "MlpPolicy",
        "env_kwargs": envs.env_kwargs,
        "stats_window_size": learner.stats_window_size,
        **wrappers_to_entry(learner.env_wrappers),
        **({"normalize": normalize_to_entry(learner.normalize)} if learner.normalize is not None else {}),
        **algo.config_to_hyperparams(learner.learner_config),
    }
    return dict(sorted(resolved.items()))


def resume_group(resume: Checkpoint, n_seeds: int | None, algo: Algorithm) -> tuple[Checkpoint, ...]:
    """The checkpoints a resume from `resume` continues, in seed order: every seed of its group (the
    default, and --n-seeds equal to the group's size), or `resume` alone (--n-seeds 1, or a one-seed run).

    A seed's siblings are the checkpoints of the same name in the run folders its manifest lists, beside its
    own; each must belong to the same group, at the same place in it and at the same env step. The folder
    names come from an untrusted file: each must be one plain name, never a path."""
    group = resume.manifest.get("group")
    size = 1 if group is None else len(group["run_dirs"])
    if n_seeds == 1 or (n_seeds is None and group is None):
        return (resume,)
    if group is None:
        raise ConfigError(
            f"--n-seeds {n_seeds}: {resume.path} is a one-seed run's checkpoint; resume it without --n-seeds"
        )
    if n_seeds not in (None, size):
        raise ConfigError(
            f"--n-seeds {n_seeds}: {resume.path} is seed {group['index'] + 1} of a group of {size}; resume the "
            f"whole group (--n-seeds {size}, the default) or this seed alone (--n-seeds 1)"
        )
    algo_dir = resume.path.resolve().parent.parent
    checkpoints = []
    for index, name in enumerate(group["run_dirs"]):
        path = algo_dir / name / resume.path.name
        if not path.is_file():
            raise ConfigError(
                f"cannot resume the group of {resume.path}: seed {index + 1}'s checkpoint {path} is missing; "
                "resume this seed alone with --n-seeds 1"
            )
        checkpoint = resume if path.samefile(resume.path) else load_resume_checkpoint(path, algo)
        sibling = checkpoint.manifest.get("group") or {}
        if sibling.get("id") != group["id"] or sibling.get("index") != index:
            raise ConfigError(
                f"cannot resume the group of {resume.path}: {path} is not seed {index + 1} of its group "
                f"{group['id']}; resume this seed alone with --n-seeds 1"
            )
        if checkpoint.manifest["counters"]["env_steps"] != resume.manifest["counters"]["env_steps"]:
            raise ConfigError(
                f"cannot resume the group of {resume.path}: {path} is at env step "
                f"{checkpoint.manifest['counters']['env_steps']}, not {resume.manifest['counters']['env_steps']}; "
                "resume from checkpoints written together (rl_model_<steps>_steps.zip, or the final models)"
            )
        checkpoints.append(checkpoint)
    return tuple(checkpoints)


def load_resume_checkpoint(path: Path, algo: Algorithm) -> Checkpoint:
    """Read and verify `-i PATH` (CheckpointError, exit 1, when torn, corrupt or forged). Before any member
    is decompressed: the manifest must hold every key a resume reads, its algorithm must be the one asked
    for, its replay buffer must fit in memory, and no member may be larger than its saved configuration
    needs."""

    def expect(manifest: dict[str, Any]) -> Expected:
        expected = resume_expectations(manifest)
        expected.check_file_holds(path.stat().st_size)  # before n_envs and the spaces size the configuration
        if manifest["algo"] != algo.name:
            raise ConfigError(
                f"{path} was trained with --algo {manifest['algo']}, but --algo {algo.name} was "
                f"given; resume it with --algo {manifest['algo']}"
            )
        spec = EnvSpec(*space_sizes(manifest))
        # The saved configuration: a resume keeps its architecture (check_resume_overrides), hence its state size.
        entry = normalize_entry(dict(manifest["hyperparams"]), str(path))
        entry.pop("env_wrapper", None)  # only the learner's size matters here; resolve() checks the wrappers
        _, _, learner_keys = split_entry(entry, str(path), trusted_wrapper_modules=())
        learner_config = algo.build_config(learner_keys, manifest["n_envs"], str(path))
        if manifest["replay_buffer"]:  # it is restored at its saved size (without one, -params may shrink it)
            remedy = f"{path} restores its replay buffer at its saved buffer_size {learner_config.buffer_size:,}"
            check_buffer_memory(learner_config.buffer_size, spec, verbose=0, remedy=remedy)
        learner = algo.make_learner(learner_config, spec)
        return dataclasses.replace(expected, state_bytes=state_size_bound(learner.init_fn))

    return read_checkpoint(path, expect=expect)


def check_resume_overrides(
    resume: Checkpoint, saved: Mapping[str, Any], merged: Mapping[str, Any], resolved: Mapping[str, Any]
) -> None:
    """Refuse -params that change the saved networks (B7); report the changes that are allowed.

    `saved` is the checkpoint's resolved entry; the networks are compared in that resolved spelling
    (`resolved`: the new learner config written back), so `net_arch=[8]` equals the saved
    `{pi: [8], qf: [8]}`.
    """
    saved_kwargs, new_kwargs = saved.get("policy_kwargs") or {}, resolved.get("policy_kwargs") or {}
    for key in ARCHITECTURE_KEYS:
        if saved_kwargs.get(key) != new_kwargs.get(key) and merged.get("policy_kwargs") == saved.get("policy_kwargs"):
            # No -params changed it: the saved value itself is not in the resolved form rlbench writes.
            raise ConfigError(
                f"policy_kwargs {key} saved in {resume.path}: {saved_kwargs.get(key)!r} is not the resolved form "
                f"rlbench saves ({new_kwargs.get(key)!r}): the checkpoint was edited, or not written by rlbench"
            )
        if saved_kwargs.get(key) != new_kwargs.get(key):
            raise ConfigError(
                f"-params policy_kwargs {key}: {new_kwargs.get(key)!r} differs from the network saved in "
                f"{resume.path} ({saved_kwargs.get(key)!r}); the architecture cannot change on resume "
                "(optimizer and schedule settings such as learning_rate can)"
            )
    saved_precision = saved.get("precision", "float32")  # checkpoints from before the key: float32
    if resolved.get("precision") != saved_precision:
        raise ConfigError(
            f"-params precision: {resolved.get('precision')!r} differs from {saved_precision!r} saved in "
            f"{resume.path}; precision cannot change on resume (a bfloat16 learner state also holds bfloat16 copies of "
            "the transposed kernels); resume with the saved precision"
        )
    for key in sorted(set(saved) | set(merged)):
        if key not in ("policy_kwargs", "n_timesteps", "precision") and saved.get(key) != merged.get(key):
            print(f"Resume: {key} changed from {saved.get(key)!r} to {merged.get(key)!r}")


def check_resume_normalize(
    resume: Checkpoint, normalize: NormalizeConfig | None, saved: NormalizeConfig | None
) -> None:
    """The networks were trained on inputs scaled as the checkpoint's `normalize` says: it cannot change."""
    if normalize != saved:
        shown = [False if cfg is None else normalize_to_entry(cfg) for cfg in (normalize, saved)]
        raise ConfigError(
            f"-params normalize: {shown[0]} differs from {resume.path}'s "
            f"({shown[1]}); the networks were trained on observations and rewards scaled that way, "
            "so normalize cannot change on resume"
        )


def check_resume_evaluations(resume: Checkpoint, eval_episodes: int) -> None:
    """evaluations.npz holds one row of episode returns per evaluation: a resume keeps their number."""
    saved = resume.group("host").get("eval_results")
    if saved is not None and saved.ndim == 2 and len(saved) and saved.shape[1] != eval_episodes:
        raise ConfigError(
            f"--eval-episodes {eval_episodes}: {resume.path}'s evaluations ran {saved.shape[1]} episodes each, "
            f"and evaluations.npz keeps one row per evaluation; resume with --eval-episodes {saved.shape[1]}"
        )


def check_resume_state(
    resume: Checkpoint,
    algo: Algorithm,
    learner_config: Any,
    spaces: Mapping[str, Any],
    normalize: NormalizeConfig | None = None,
) -> None:
    """The saved learner state, `normalize` statistics and replay buffer must fit the resolved configuration
    (B7, B8)."""
    spec = EnvSpec(int(np.prod(spaces["observation"]["shape"])), int(np.prod(spaces["action"]["shape"])))
    learner = algo.make_learner(learner_config, spec)
    try:
        check_state_fits(learner.init_fn, resume.state_bytes)
        if normalize is not None:
            check_arrays(resume.group("normalize"), expected_shapes(spec.obs_dim, resume.manifest["n_envs"]))
    except ValueError as error:
        raise ConfigError(f"cannot resume from {resume.path}: {error}") from None
    saved_buffer = resume.group("replay_buffer")
    if not saved_buffer:
        return
    saved_capacity = int(saved_buffer["capacity"])
    if saved_capacity != learner_config.buffer_size:
        raise ConfigError(
            f"cannot resume from {resume.path}: its replay buffer has buffer_size={saved_capacity}, "
            f"the configuration {learner_config.buffer_size}; drop the buffer_size override"
        )
    try:
        check_buffer_arrays(learner_config.buffer_size, spec, saved_buffer)
    except ValueError as error:
        raise ConfigError(f"cannot resume from {resume.path}: {error}") from None


def check_spaces(resume: Checkpoint, current: Mapping[str, Any], allow_bounds_mismatch: bool, env_id: str) -> None:
    """The env must match the checkpoint's spaces: shapes and dtypes always (B2, B4); bounds unless
    --allow-space-bounds-mismatch (B3). Another env id with the same spaces is allowed, with a warning."""
    saved = resume.manifest["spaces"]
    for name in ("observation", "action"):
        was, now = saved[name], current[name]
        if (was["shape"], was["dtype"]) != (now["shape"], now["dtype"]):
            raise ConfigError(
                f"{name} space mismatch: saved={was['dtype']}{was['shape']} "
                f"current={now['dtype']}{now['shape']} ({resume.path} was trained on "
                f"{resume.manifest['env_id']})"
            )
        if (was["low"], was["high"]) != (now["low"], now["high"]):
            message = (
                f"{name} space bounds differ from {resume.path}'s: saved low={was['low']} "
                f"high={was['high']}, current low={now['low']} high={now['high']}"
            )
            if not allow_bounds_mismatch:
                raise ConfigError(message + "; pass --allow-space-bounds-mismatch to resume anyway")
            print(f"Warning: {message}", file=sys.stderr)
    if resume.manifest["env_id"] != env_id:  # after the checks above, whose errors name the saved env already
        print(
            f"Warning: {resume.path} was trained on {resume.manifest['env_id']}, this run uses --env {env_id}",
            file=sys.stderr,
        )
