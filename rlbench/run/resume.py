"""`train.py -i`: the checkpoint a run resumes, read and checked before anything is written.

`load_resume_checkpoint` reads and verifies the file (a torn or forged one is CheckpointError, exit 1, before any
member is decompressed); `resume_group` finds the other seeds of its group; the checks below refuse what cannot
continue it (ConfigError, exit 2): another algorithm, other spaces, another network or precision, another
`normalize`, a saved state or buffer that does not fit the configuration, another number of evaluation episodes.
`rlbench.run.experiment.resolve` calls them in that order.
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from rlbench.algos.common.config import LearnerConfig
from rlbench.buffers.normalization import NormalizeConfig
from rlbench.buffers.uniform import check_buffer_arrays
from rlbench.config.algorithm import Algorithm
from rlbench.config.entry import normalize_entry, normalize_to_entry, split_entry
from rlbench.envs.obs_normalizer import check_arrays, expected_shapes
from rlbench.errors import ConfigError
from rlbench.run.memory import check_buffer_memory
from rlbench.store.checkpoint import Checkpoint, newest_valid_checkpoint, periodic_checkpoints, read_checkpoint
from rlbench.store.expectations import resume_expectations
from rlbench.store.learner_state import check_state_fits, state_size_bound
from rlbench.store.manifest import Manifest, Spaces
from rlbench.store.schema import Expected
from rlbench.store.values import check_checkpoint_values


def resume_path(path: Path) -> Path:
    """`-i PATH`: a checkpoint file, or a run folder, whose newest valid rl_model_<steps>_steps.zip is resumed
    (as enjoy.py's --load-last-checkpoint picks it), said in one line with the newer ones it skipped; a
    folder without a valid one is bad input (exit 2)."""
    if not path.is_dir():
        return path
    found, newest = periodic_checkpoints(path), newest_valid_checkpoint(path)
    if newest is None:
        held = f"{len(found)} rl_model_*_steps.zip, none valid" if found else "no rl_model_*_steps.zip checkpoint"
        raise ConfigError(
            f"-i {path}: a folder with {held}; name a checkpoint file (.zip), or a run folder holding one "
            "(written by --save-freq N, or by a run stopped with Ctrl-C or SIGTERM)"
        )
    newest_steps = next(steps for steps, candidate in found if candidate == newest)
    newer = [candidate.name for steps, candidate in found if steps > newest_steps]
    print(
        f"-i {path}: resuming from its newest valid checkpoint {newest.name}"
        + (f" (skipped, corrupt or incomplete: {', '.join(newer)})" if newer else "")
    )
    return newest


def load_resume_checkpoint(path: Path, algo: Algorithm) -> Checkpoint:
    """Read and verify `-i PATH` (CheckpointError, exit 1, when torn, corrupt or forged). Before any member
    is decompressed: the manifest must hold every key a resume reads, its algorithm must be the one asked
    for, its replay buffer must fit in memory, and no member may be larger than its saved configuration
    needs."""

    def expect(manifest: Manifest) -> Expected:
        expected = resume_expectations(manifest)
        expected.check_file_holds(path.stat().st_size)  # before n_envs and the spaces size the configuration
        run = manifest.run
        if run.algo != algo.name:
            raise ConfigError(
                f"{path} was trained with --algo {run.algo}, but --algo {algo.name} was given; resume it with "
                f"--algo {run.algo}"
            )
        # The saved configuration: a resume keeps its architecture (check_resume_overrides), hence its state size.
        entry = normalize_entry(dict(run.hyperparams), str(path))
        entry.pop("env_wrapper", None)  # only the learner's size matters here; resolve() checks the wrappers
        _, _, learner_keys = split_entry(entry, str(path), trusted_wrapper_modules=())
        learner_config = algo.build_config(learner_keys, run.n_envs, str(path))
        learner = algo.make_learner(learner_config, run.spaces.spec)
        capacity = learner.storage.replay_capacity
        if manifest.replay_buffer and not capacity:
            raise ConfigError(f"{path}: its manifest lists a replay buffer, and --algo {algo.name} keeps none")
        if manifest.replay_buffer:  # it is restored at its saved size (without one, -params may shrink it)
            remedy = f"{path} restores its replay buffer at its saved buffer_size {capacity:,}"
            check_buffer_memory(capacity, run.spaces.spec, verbose=0, remedy=remedy)
        return dataclasses.replace(expected, state_bytes=state_size_bound(learner.init_fn))

    return read_checkpoint(path, expect=expect)


def resume_group(resume: Checkpoint, n_seeds: int | None, algo: Algorithm) -> tuple[Checkpoint, ...]:
    """The checkpoints a resume from `resume` continues, in seed order: every seed of its group (the
    default, and --n-seeds equal to the group's size), or `resume` alone (--n-seeds 1, or a one-seed run).

    A seed's siblings are the checkpoints of the same name in the run folders its manifest lists, beside its
    own; each must belong to the same group, at the same place in it and at the same env step. The folder
    names come from an untrusted file (checked by rlbench.store.schema: each is one plain name, never a path)."""
    group = resume.manifest.run.group
    if n_seeds == 1 or (n_seeds is None and group is None):
        return (resume,)
    if group is None:
        raise ConfigError(
            f"--n-seeds {n_seeds}: {resume.path} is a one-seed run's checkpoint; resume it without --n-seeds"
        )
    size = len(group.run_dirs)
    if n_seeds not in (None, size):
        raise ConfigError(
            f"--n-seeds {n_seeds}: {resume.path} is seed {group.index + 1} of a group of {size}; resume the "
            f"whole group (--n-seeds {size}, the default) or this seed alone (--n-seeds 1)"
        )
    algo_dir = resume.path.resolve().parent.parent
    return tuple(
        _group_member(resume, index, algo_dir / name / resume.path.name, algo)
        for index, name in enumerate(group.run_dirs)
    )


def _group_member(resume: Checkpoint, index: int, path: Path, algo: Algorithm) -> Checkpoint:
    """Seed `index`'s checkpoint of `resume`'s group, at `path`: of that group, at that place, at the same step."""
    group, where = resume.manifest.run.group, f"cannot resume the group of {resume.path}"
    assert group is not None, "resume_group asks for the members of a group's checkpoint only"
    if not path.is_file():
        raise ConfigError(
            f"{where}: seed {index + 1}'s checkpoint {path} is missing; resume this seed alone with --n-seeds 1"
        )
    checkpoint = resume if path.samefile(resume.path) else load_resume_checkpoint(path, algo)
    sibling = checkpoint.manifest.run.group
    if sibling is None or sibling.id != group.id or sibling.index != index:
        raise ConfigError(
            f"{where}: {path} is not seed {index + 1} of its group {group.id}; resume this seed alone with --n-seeds 1"
        )
    steps, expected_steps = checkpoint.manifest.counters.env_steps, resume.manifest.counters.env_steps
    if steps != expected_steps:
        raise ConfigError(
            f"{where}: {path} is at env step {steps}, not {expected_steps}; resume from checkpoints written "
            "together (rl_model_<steps>_steps.zip, or the final models)"
        )
    return checkpoint


def check_spaces(resume: Checkpoint, current: Mapping[str, Any], allow_bounds_mismatch: bool, env_id: str) -> None:
    """The env must match the checkpoint's spaces: shapes and dtypes always (B2, B4); bounds unless
    --allow-space-bounds-mismatch (B3). Another env id with the same spaces is allowed, with a warning."""
    saved_spaces, now_spaces, saved_env = (
        resume.manifest.run.spaces,
        Spaces.from_json(current),
        resume.manifest.run.env_id,
    )
    for name in ("observation", "action"):
        was, now = getattr(saved_spaces, name), getattr(now_spaces, name)
        if (was.shape, was.dtype) != (now.shape, now.dtype):
            raise ConfigError(
                f"{name} space mismatch: saved={was.dtype}{list(was.shape)} current={now.dtype}{list(now.shape)} "
                f"({resume.path} was trained on {saved_env})"
            )
        if (was.low, was.high) != (now.low, now.high):
            message = (
                f"{name} space bounds differ from {resume.path}'s: saved low={list(was.low)} "
                f"high={list(was.high)}, current low={list(now.low)} high={list(now.high)}"
            )
            if not allow_bounds_mismatch:
                raise ConfigError(message + "; pass --allow-space-bounds-mismatch to resume anyway")
            print(f"Warning: {message}", file=sys.stderr)
    if saved_env != env_id:  # after the checks above, whose errors name the saved env already
        print(f"Warning: {resume.path} was trained on {saved_env}, this run uses --env {env_id}", file=sys.stderr)


def check_resume_overrides(
    algo: Algorithm,
    resume: Checkpoint,
    saved: Mapping[str, Any],
    merged: Mapping[str, Any],
    resolved: Mapping[str, Any],
) -> None:
    """Refuse -params that change the saved networks (B7); report the changes that are allowed.

    `saved` is the checkpoint's resolved entry; the networks are compared in that resolved format
    (`resolved`: the new learner config written back), so `net_arch=[8]` equals the saved
    `{pi: [8], qf: [8]}`. The policy_kwargs compared are those the algorithm says shape its networks.
    """
    saved_kwargs, new_kwargs = saved.get("policy_kwargs") or {}, resolved.get("policy_kwargs") or {}
    for key in algo.architecture_keys:
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
    saved_policy = saved.get("policy", "MlpPolicy")
    if resolved.get("policy") != saved_policy:
        raise ConfigError(
            f"-params policy: {resolved.get('policy')!r} differs from {saved_policy!r} saved in {resume.path}; the "
            "network family cannot change on resume (the saved parameters fit no other); resume with the saved policy"
        )
    saved_precision = saved.get("precision", "float32")  # checkpoints from before the key: float32
    if "precision" in algo.keys.keys and resolved.get("precision") != saved_precision:
        raise ConfigError(
            f"-params precision: {resolved.get('precision')!r} differs from {saved_precision!r} saved in "
            f"{resume.path}; precision cannot change on resume (a bfloat16 learner state also holds bfloat16 copies of "
            "the transposed kernels); resume with the saved precision"
        )
    for key in sorted(set(saved) | set(merged)):
        if key not in ("policy_kwargs", "n_timesteps", "precision", "policy") and saved.get(key) != merged.get(key):
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
    learner_config: LearnerConfig,
    spaces: Mapping[str, Any],
    normalize: NormalizeConfig | None = None,
) -> None:
    """The saved learner state, `normalize` statistics and replay buffer must fit the resolved configuration
    (B7, B8), and hold only values a checkpoint rlbench writes holds (finite, counters in range)."""
    spec = Spaces.from_json(spaces).spec
    learner = algo.make_learner(learner_config, spec)
    try:
        check_state_fits(learner.init_fn, resume.state_bytes)
        check_checkpoint_values(resume)
        if normalize is not None:
            check_arrays(resume.group("normalize"), expected_shapes(spec.obs_dim, resume.manifest.run.n_envs))
    except ValueError as error:
        raise ConfigError(f"cannot resume from {resume.path}: {error}") from None
    saved_buffer = resume.group("replay_buffer")
    if not saved_buffer:
        return
    capacity = learner.storage.replay_capacity
    if not capacity:
        raise ConfigError(
            f"cannot resume from {resume.path}: it holds a replay buffer, and --algo {algo.name} keeps none"
        )
    saved_capacity = int(saved_buffer["capacity"])
    if saved_capacity != capacity:
        raise ConfigError(
            f"cannot resume from {resume.path}: its replay buffer has buffer_size={saved_capacity}, "
            f"the configuration {capacity}; drop the buffer_size override"
        )
    try:
        check_buffer_arrays(capacity, spec, saved_buffer)
    except ValueError as error:
        raise ConfigError(f"cannot resume from {resume.path}: {error}") from None
