"""The device loop, top to bottom: a chunk of vector steps on the device, up to the next point where something
falls due -> its episodes accounted on the host (Monitor files, the rollout statistics) -> the learner states
checked finite (rlbench.loop.divergence: a one-seed run ends, a seed of several is frozen) -> what falls due
(evaluate on the device, the caller's callbacks, log, save) -> again. It is the host loop's run_loop
(rlbench.loop.training_loop) advancing a chunk at a time, with the same stages after it on the same LoopRun.

Logs follow SB3's rhythm at chunk ends: once log_interval more episodes have ended when a chunk returns,
one row (the host loop writes it at the exact vector step)."""

from __future__ import annotations

from dataclasses import dataclass

import jax
import numpy as np

from rlbench.loop.compiled import DeviceCarry, device_copy
from rlbench.loop.device.program import ChunkInputs, DevicePrograms
from rlbench.loop.device.start import uint32_seeds
from rlbench.loop.divergence import verify_finite
from rlbench.loop.evaluation import EvalResult, eval_env_seeds, record_evaluations
from rlbench.loop.metrics_log import ProgressBar
from rlbench.loop.run_state import LoopRun, TrainResult
from rlbench.loop.training_loop import OnEval, OnIteration, StopRequested, run_loop
from rlbench.types import Transition

INT32_MAX = np.iinfo(np.int32).max


@dataclass
class DeviceRun:
    """A LoopRun whose envs live on the device (its carry a DeviceCarry), with its compiled programs."""

    loop: LoopRun
    device: DevicePrograms
    chunk_length: int
    eval_steps: int  # at most this many vector steps in one call of an evaluation


def run_device_loop(
    device_run: DeviceRun,
    on_eval: OnEval | None = None,
    on_iteration: OnIteration | None = None,
    stop_requested: StopRequested | None = None,
) -> TrainResult:
    """The host loop's run_loop (rlbench.loop.training_loop) advancing a chunk at a time: until loop.run.n_timesteps
    env steps per seed, every seed failed, or a stop is requested (polled between chunks)."""

    def advance(loop: LoopRun, bar: ProgressBar) -> None:
        if run_chunk(device_run):
            bar.trained(loop.host.env_steps)
        verify_finite(loop)  # every chunk's end: a diverged learner is caught within a chunk

    evaluate = None if device_run.device.evaluate is None else (lambda loop, stop: evaluate_on_device(device_run, stop))
    return run_loop(device_run.loop, on_eval, on_iteration, stop_requested, advance, evaluate)


def run_chunk(device_run: DeviceRun) -> bool:
    """One chunk up to the next due point; the host state follows it. Returns whether it trained."""
    loop = device_run.loop
    host, axis = loop.host, loop.axis
    n_steps = steps_until_due(loop, device_run.chunk_length)
    carry = loop.carry
    assert isinstance(carry, DeviceCarry), "the device loop's LoopRun carries its envs"
    update_start = np.int32(min(host.update_start, INT32_MAX))
    n_timesteps = np.float32(loop.run.n_timesteps)
    inputs = ChunkInputs(np.int32(host.vector_steps), np.int32(n_steps), update_start, n_timesteps, loop.training)
    carry, outputs = device_run.device.chunk(carry, inputs)
    loop.carry = carry
    host.act_key = carry.act_key  # what a checkpoint saves of it, and of the envs where they can be saved
    host.device_envs = carry.envs if device_run.device.envs.saves_envs else None
    host.obs = axis.host(carry.envs.obs)
    reward, done, valid = (np.asarray(x)[:n_steps].reshape(n_steps, axis.n_seeds, -1) for x in outputs[:3])
    account_episodes(loop, reward, done, valid)
    host.env_steps += n_steps * loop.run.n_envs
    host.vector_steps += n_steps
    if carry.rollout is not None:
        stage_on_host(loop, carry.rollout)
    trained = bool(outputs.trained)
    if trained:  # a copy: the carry's arrays are donated to the next chunk
        host.metrics = device_copy(carry.metrics)
    return trained


def stage_on_host(loop: LoopRun, rollout: Transition) -> None:
    """An on-policy learner's rollout staged so far, into the host state where the host loop stages it, so that
    a checkpoint holds it (and a resume, on either loop, continues it). Chunks end at rollout ends (runner.
    chunk_length) unless something falls due mid-rollout: only then does anything cross."""
    pending, steps_in = loop.host.pending, loop.host.vector_steps % loop.schedule.collection.vector_steps_per_update
    pending.count = steps_in * loop.run.n_envs
    if pending.count:
        staged = jax.device_get(rollout)
        for name in pending.saved_fields:
            getattr(pending, name)[:, : pending.count] = loop.axis.host(getattr(staged, name))[:, : pending.count]


def steps_until_due(loop: LoopRun, chunk_length: int) -> int:
    """Vector steps to the next evaluation, periodic checkpoint or the end of the run, at most a chunk."""
    run, host = loop.run, loop.host
    left = -(-(run.n_timesteps - host.env_steps) // run.n_envs)
    periods = []
    if run.eval_freq > 0:
        periods.append(max(run.eval_freq // run.n_envs, 1))
    if loop.saves.enabled and loop.saves.per_seed[0].save_freq > 0:
        periods.append(max(loop.saves.per_seed[0].save_freq // run.n_envs, 1))
    return min(chunk_length, left, *(period - host.vector_steps % period for period in periods))


def account_episodes(loop: LoopRun, reward: np.ndarray, done: np.ndarray, valid: np.ndarray) -> None:
    """A chunk's rewards, episode ends and transitions ([n_steps, n_seeds, n_envs]; an EnvPool reset step is no
    transition and adds nothing) into each seed's episode tracker and Monitor file, step by step as the host loop
    accounts them."""
    for step_reward, step_done, step_valid in zip(reward, done, valid, strict=True):
        for index, seed in enumerate(loop.host.seeds):
            monitor = loop.monitors[index] if seed.failed is None else None
            ended = seed.episodes.step(step_reward[index], step_done[index], step_valid[index])
            for env_index, episode_return, length in ended:
                if monitor is not None:
                    monitor.episode(env_index, episode_return, length)


def evaluate_on_device(device_run: DeviceRun, stop_requested: StopRequested | None) -> list[EvalResult | None] | None:
    """Every seed's deterministic policy on its own eval envs, on the device, in calls of at most
    device_run.eval_steps vector steps; recorded as the host loop's. None, with nothing recorded, when a stop is
    requested before it ends: a compiled call cannot be interrupted, so the host looks between calls."""
    loop, programs = device_run.loop, device_run.device.evaluate
    assert programs is not None, "run_device_loop evaluates a run with eval envs only"
    axis = loop.axis
    verify_finite(loop)  # a diverged policy is not worth evaluating, nor a best_model
    seeds = uint32_seeds(eval_env_seeds(loop)).reshape(axis.n_seeds, loop.run.n_eval_envs)
    evaluation, done, max_steps = programs.start(axis.device(seeds)), False, np.int32(device_run.eval_steps)
    while not done:
        if stop_requested is not None and stop_requested():
            return None
        evaluation, finished = programs.advance(loop.state, evaluation, max_steps)
        done = bool(finished)
    returns, lengths = axis.host(evaluation.returns), axis.host(evaluation.lengths)
    results = [
        EvalResult(returns=returns[index].astype(np.float64), lengths=lengths[index].astype(np.int64))
        for index in range(axis.n_seeds)
    ]
    return record_evaluations(loop, results)
