"""A device-loop run's first state: learner states, replay buffers, training envs and act keys on the device,
and the host state beside them, new or from one checkpoint per seed. Seeds and keys are the host loop's
(rlbench.loop.start): seed s's learner starts from key(s) exactly as a single run's, env j of seed s from
seed s + j. A resume restores the envs' saved state exactly (mid-episode included), after checking it
against the envs this configuration builds."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from rlbench.config.entry import RunConfig
from rlbench.envs.jax_native.vector import EnvCarry
from rlbench.errors import ConfigError
from rlbench.loop.compiled import EntryPoints
from rlbench.loop.device.program import DeviceCarry, DevicePrograms, initial_metrics
from rlbench.loop.saving import new_host_state, restore, train_after_new_transitions
from rlbench.loop.start import env_seeds, first_learners
from rlbench.store.checkpoint import Checkpoint
from rlbench.store.host_state import HostState
from rlbench.store.learner_state import state_from_bytes
from rlbench.types import EnvSpec


def start_on_device(
    run: RunConfig,
    cfg: Any,
    spec: EnvSpec,
    programs: EntryPoints,
    device: DevicePrograms,
    resume: Sequence[Checkpoint] | None,
) -> tuple[DeviceCarry, HostState]:
    """The device carry and host state a run starts from (ConfigError when a checkpoint does not fit)."""
    axis, n_envs = programs.axis, run.n_envs
    seeds, state, act_key = first_learners(run, programs)
    buffers = programs.init_buffers()
    metrics = initial_metrics(cfg, programs.learner, programs.buffer, axis, state, buffers)
    envs = new_envs(device, axis, seeds, 0, n_envs)
    if resume is None:
        host = new_host_state(seeds, axis.host(envs.obs), act_key, spec, cfg.learning_starts, n_envs)
        host.device_envs = envs
        return DeviceCarry(state, buffers, envs, act_key, metrics), host
    restored = restore(
        resume, seeds, axis.take(state, 0), programs.buffer, spec, n_envs, n_envs, axis.host(envs.obs), None
    )
    host = restored.host
    host.act_key, host.next_action = axis.device(host.act_key), None  # the device loop acts inside its chunk
    if restored.buffer_states is None:
        train_after_new_transitions(host, cfg.learning_starts, resume[0].path)
    else:
        buffers = axis.stack(restored.buffer_states)
    if restored.replay_envs and host.saved_device_envs and None not in host.saved_device_envs:
        envs = saved_envs(envs, axis, host.saved_device_envs, resume)
    else:
        print("The checkpoints hold no envs for this n_envs: the envs start new episodes")
        for seed in host.seeds:
            for i in range(n_envs):
                seed.episodes.restart(i)
        envs = new_envs(device, axis, seeds, host.env_steps, n_envs)
    host.saved_device_envs, host.device_envs, host.obs = None, envs, axis.host(envs.obs)
    return DeviceCarry(axis.stack(restored.states), buffers, envs, host.act_key, metrics), host


def new_envs(device: DevicePrograms, axis, seeds: Sequence[int], offset: int, n_envs: int) -> EnvCarry:
    """Each seed's n_envs envs reset from the host loop's env seeds (s + offset + j), in the device layout."""
    flat = uint32_seeds(env_seeds(seeds, offset, n_envs))
    return device.reset(axis.device(flat.reshape(axis.n_seeds, n_envs)))


def uint32_seeds(seeds: Sequence[int]) -> np.ndarray:
    """Env seeds as the device takes them: 32 bits (seeds go up to 2**32 - 1; an offset past it wraps)."""
    return np.asarray([seed % 2**32 for seed in seeds], np.uint32)


def saved_envs(fresh: EnvCarry, axis, saved: list[bytes], resume: Sequence[Checkpoint]) -> EnvCarry:
    """The envs as each seed's checkpoint holds them, checked leaf by leaf against freshly reset ones."""
    template = axis.take(fresh, 0)
    envs = []
    for checkpoint, data in zip(resume, saved, strict=True):
        try:
            envs.append(state_from_bytes(template, data))
        except ValueError as error:
            raise ConfigError(f"cannot resume from {checkpoint.path}: host/device_envs: {error}") from None
    return axis.stack(envs)
