"""A run's first state: each seed's learner state and replay buffer on the device and the host state,
new or from one checkpoint per seed (rlbench.loop.saving reads them; the envs are replayed to where
their episodes were)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import jax
import numpy as np
import numpy.typing as npt
from gymnasium.vector import VectorEnv

from rlbench.buffers.normalization import NormalizeConfig
from rlbench.config.entry import RunConfig
from rlbench.errors import ConfigError
from rlbench.files import remove_stale_temporaries
from rlbench.loop.compiled import Carry, EntryPoints
from rlbench.loop.saving import Restored, new_host_state, restore, restore_envs, train_after_new_transitions
from rlbench.loop.schedule import TrainSchedule
from rlbench.store.checkpoint import Checkpoint
from rlbench.store.host_state import HostState
from rlbench.types import EnvSpec, PyTree


def env_seeds(seeds: Sequence[int], offset: int, n_envs: int) -> list[int]:
    """Each env's seed, seed after seed: env j of seed s gets s + offset + j (as env.reset(seed=s + offset)
    seeds a single run's envs)."""
    return [seed + offset + j for seed in seeds for j in range(n_envs)]


def remove_stale_writes(resume: Sequence[Checkpoint]) -> None:
    """The temporary files that a writer killed mid-save left beside the checkpoints a run resumes (the old run
    folders, which the run does not write again); a live writer's (a run still going there) are left alone."""
    for folder in dict.fromkeys(checkpoint.path.parent for checkpoint in resume):
        removed = remove_stale_temporaries(folder)
        if removed:
            print(f"Removed {len(removed)} temporary file(s) of a write that did not finish from {folder}")


def initial_learner_states(run: RunConfig, programs: EntryPoints) -> tuple[list[int], PyTree, jax.Array]:
    """The run's seeds, their initial learner states and act keys (device layout: no seed axis for one seed).
    Each seed's state comes from the one-seed init: seed i starts exactly as a single run with that seed."""
    axis = programs.axis
    seeds = [run.seed + index for index in range(axis.n_seeds)]
    keys = [jax.random.split(jax.random.key(seed)) for seed in seeds]
    return seeds, axis.stack([programs.init(key) for key, _ in keys]), axis.stack([act_key for _, act_key in keys])


def start(
    run: RunConfig,
    spec: EnvSpec,
    env: VectorEnv,
    programs: EntryPoints,
    schedule: TrainSchedule,
    resume: Sequence[Checkpoint] | None,
) -> tuple[Carry, HostState]:
    """The device carry and the host state a run starts from; the envs reset (or replayed, on resume)."""
    axis, learning_starts = programs.axis, programs.learner.collection.learning_starts
    seeds, state, act_key = initial_learner_states(run, programs)
    carry = Carry(state, programs.init_buffers())
    flat_obs = env.reset(seed=env_seeds(seeds, 0, run.n_envs))[0]  # type: ignore[arg-type]  # one seed per env
    obs = flat_obs.reshape(axis.n_seeds, run.n_envs, -1)
    capacity = schedule.staging_capacity
    stages_truncation = programs.learner.collection.stages_rollout
    if resume is None:
        host = new_host_state(seeds, obs, act_key, spec, learning_starts, capacity, run.normalize)
        host.pending.stages_truncation = stages_truncation
        return carry, host
    restored, states, buffers = resume_learners(run, spec, programs, resume, seeds, state, capacity, obs, run.normalize)
    host = restored.host
    if host.next_action is not None:  # the checkpoints' next actions, stacked per seed, in the device layout
        host.next_action = axis.device(host.next_action)
    carry = Carry(states, carry.buffer_state if buffers is None else buffers)
    if restored.replay_envs:
        restore_envs(env, host, restored.records, env_seeds(seeds, host.env_steps, run.n_envs))
    return carry, host


def resume_learners(
    run: RunConfig,
    spec: EnvSpec,
    programs: EntryPoints,
    resume: Sequence[Checkpoint],
    seeds: Sequence[int],
    fresh_states: PyTree,
    capacity: int,
    fresh_obs: npt.NDArray[np.floating[Any]],
    normalize: NormalizeConfig | None,
) -> tuple[Restored, PyTree, PyTree | None]:
    """The restore sequence both loops share: the checkpoints read (rlbench.loop.saving.restore), the learner
    states and replay buffers stacked in the device layout (buffers None: the checkpoints hold none, and an
    off-policy learner trains again only after `learning_starts` new transitions), the act keys too, and the
    staged rollout checked to carry what the learner stages (ConfigError when a checkpoint does not fit)."""
    axis, storage, collection = programs.axis, programs.learner.storage, programs.learner.collection
    remove_stale_writes(resume)
    template = axis.take(fresh_states, 0)
    restored = restore(resume, seeds, template, storage.replay, spec, run.n_envs, capacity, fresh_obs, normalize)
    host = restored.host
    if host.pending.count and collection.stages_rollout and not host.pending.stages_truncation:
        raise ConfigError(f"cannot resume from {resume[0].path}: its staged rollout lacks host/pending_truncated")
    host.pending.stages_truncation = collection.stages_rollout  # a forged extra column is dropped
    host.act_key = axis.device(host.act_key)
    buffers = None if restored.buffer_states is None else axis.stack(restored.buffer_states)
    if buffers is None and storage.replay is not None:  # an on-policy learner keeps nothing between updates
        train_after_new_transitions(host, collection.learning_starts, resume[0].path)
    return restored, axis.stack(restored.states), buffers
