"""A device-loop run's first state: learner states, replay buffers, training envs and act keys on the device,
and the host state beside them, new or from one checkpoint per seed. Seeds and keys are the host loop's
(rlbench.loop.start): seed s's learner starts from key(s) exactly as a single run's, env j of seed s from
seed s + j. A resume restores the envs' saved state exactly (mid-episode included), after checking it
against the envs this configuration builds."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, cast

import jax
import jax.numpy as jnp
import numpy as np
import numpy.typing as npt

from rlbench.algos.common.config import LearnerConfig
from rlbench.algos.common.seed_axis import SeedAxis
from rlbench.config.entry import RunConfig
from rlbench.envs.jax_native.ids import make_jax_env
from rlbench.envs.jax_native.vector import EnvCarry, reset_envs
from rlbench.errors import ConfigError
from rlbench.loop.compiled import DeviceCarry, EntryPoints
from rlbench.loop.device.program import DevicePrograms, initial_metrics
from rlbench.loop.saving import new_host_state
from rlbench.loop.start import env_seeds, initial_learner_states, resume_learners
from rlbench.store.checkpoint import Checkpoint
from rlbench.store.host_state import HostState
from rlbench.store.learner_state import restore_fitting, state_from_bytes, tree_shapes
from rlbench.store.values import FORGED, tree_problem
from rlbench.types import EnvSpec, PyTree

SAVED_ENVS = "the env state saved in host/device_envs.npy"  # how messages name it


def start_on_device(
    run: RunConfig,
    cfg: LearnerConfig,
    spec: EnvSpec,
    programs: EntryPoints,
    device: DevicePrograms,
    resume: Sequence[Checkpoint] | None,
) -> tuple[DeviceCarry, HostState]:
    """The device carry and host state a run starts from (ConfigError when a checkpoint does not fit)."""
    axis, n_envs, collection = programs.axis, run.n_envs, programs.learner.collection
    seeds, state, act_key = initial_learner_states(run, programs)
    buffers = programs.init_buffers()
    saves_envs = device.envs.saves_envs
    # Off-policy, each vector step inserts its transitions: nothing is ever staged on the host.
    capacity = n_envs * (collection.vector_steps_per_update if collection.stages_rollout else 1)
    if resume is None:
        envs = new_envs(device, axis, seeds, 0, n_envs)
        host = new_host_state(seeds, axis.host(envs.obs), act_key, spec, collection.learning_starts, capacity)
        host.pending.stages_truncation = collection.stages_rollout
        host.device_envs = envs if saves_envs else None
        return _carry(programs, state, buffers, envs, act_key, host), host
    # EnvPool's pools are made once, from the seeds of the env steps a resume starts at (below)
    fresh = new_envs(device, axis, seeds, 0, n_envs) if saves_envs else None
    fresh_obs = axis.host(fresh.obs) if fresh is not None else np.zeros((axis.n_seeds, n_envs, spec.obs_dim))
    restored, states, restored_buffers = resume_learners(
        run, spec, programs, resume, seeds, state, capacity, fresh_obs.astype(np.float32), None
    )
    host = restored.host
    host.next_action = None  # the device loop acts inside its chunk
    buffers = buffers if restored_buffers is None else restored_buffers
    if fresh is not None and restored.replay_envs and host.saved_device_envs and None not in host.saved_device_envs:
        envs = saved_envs(fresh, axis, cast(list[bytes], host.saved_device_envs))  # None is not in it
    else:
        why = "hold no envs for this n_envs" if saves_envs else f"cannot hold {run.env_id}'s envs (EnvPool)"
        print(f"The checkpoints {why}: the envs start new episodes")
        for seed in host.seeds:
            for i in range(n_envs):
                seed.episodes.restart(i)
        envs = new_envs(device, axis, seeds, host.env_steps, n_envs)
    host.saved_device_envs, host.obs = None, axis.host(envs.obs)
    host.device_envs = envs if saves_envs else None
    return _carry(programs, states, buffers, envs, host.act_key, host), host


def _carry(
    programs: EntryPoints, state: PyTree, buffers: PyTree, envs: EnvCarry, act_key: jax.Array, host: HostState
) -> DeviceCarry:
    """The device carry, with an on-policy learner's rollout staged as the host state holds it (a resume mid-
    rollout continues it; a new run's is zeros)."""
    rollout = None
    if programs.learner.collection.stages_rollout:
        rollout = jax.device_put(programs.axis.device(host.pending.rows()))
    metrics = initial_metrics(programs.learner, programs.axis, state, buffers, rollout)
    return DeviceCarry(state, buffers, envs, act_key, metrics, rollout)


def new_envs(device: DevicePrograms, axis: SeedAxis, seeds: Sequence[int], offset: int, n_envs: int) -> EnvCarry:
    """Each seed's n_envs envs reset from the host loop's env seeds (s + offset + j), in the device layout."""
    flat = uint32_seeds(env_seeds(seeds, offset, n_envs))
    return device.envs.reset(axis.device(flat.reshape(axis.n_seeds, n_envs)))


def uint32_seeds(seeds: Sequence[int]) -> npt.NDArray[np.uint32]:
    """Env seeds as the device takes them: 32 bits (seeds go up to 2**32 - 1; an offset past it wraps)."""
    return np.asarray([seed % 2**32 for seed in seeds], np.uint32)


def saved_envs(fresh: EnvCarry, axis: SeedAxis, saved: list[bytes]) -> EnvCarry:
    """The envs as each seed's checkpoint holds them (checked by `check_saved_envs` when the run was resolved)."""
    template = axis.take(fresh, 0)
    envs: EnvCarry = axis.stack([state_from_bytes(template, data, SAVED_ENVS) for data in saved])
    return envs


def check_saved_envs(env_id: str, env_kwargs: Mapping[str, Any], n_envs: int, resume: Sequence[Checkpoint]) -> None:
    """ConfigError, before any run folder exists, unless each checkpoint's envs (host/device_envs), where a resume
    restores them (the same n_envs), fit the envs this configuration builds leaf by leaf (structure, shapes,
    dtypes), hold no NaN or inf, and count their episodes' steps within the time limit (a negative count would
    switch it off)."""
    env = make_jax_env(env_id, env_kwargs)
    seed_shape = jax.ShapeDtypeStruct((n_envs,), jnp.uint32)
    shapes = tree_shapes(lambda seeds: reset_envs(env, seeds), seed_shape)
    for checkpoint in resume:
        host = checkpoint.group("host")
        if "device_envs" not in host or len(host["obs"]) != n_envs:
            continue  # the envs start new episodes
        try:
            envs = restore_fitting(shapes, host["device_envs"].tobytes(), SAVED_ENVS)
        except ValueError as error:
            raise ConfigError(f"cannot resume from {checkpoint.path}: {error}") from None
        problem = tree_problem(envs._replace(elapsed=None), counters=False) or _elapsed_problem(
            np.asarray(envs.elapsed), env.max_episode_steps
        )
        if problem is not None:
            raise ConfigError(f"cannot resume from {checkpoint.path}: host/device_envs.npy holds {problem} ({FORGED})")


def _elapsed_problem(elapsed: np.ndarray, limit: int) -> str | None:
    """The first env whose episode step count is outside [0, the time limit]; None when none is."""
    outside = (elapsed < 0) | (elapsed > limit)
    if not outside.any():
        return None
    index = int(np.argmax(outside))
    return f"{int(elapsed[index])} at elapsed[{index}], an episode step count outside [0, {limit}] (the time limit)"
