"""The host loop, top to bottom: act -> step the envs -> stage the transitions -> (when due) one fused
training iteration on the device -> what falls due (evaluate, report, log, save) -> again.

This module holds no math and no stage of its own: each line of `run_loop` is a call into the module that
does that part (rlbench.loop.collect, .updating, .evaluation, .metrics_log, .save_points; when to train and
when gSDE resamples is rlbench.loop.schedule's, the compiled programs rlbench.loop.compiled's). A training
iteration is one device call that also returns the next action, so one env step costs one dispatch; the
divergence checks run where the metrics come to the host anyway (log, evaluation, checkpoint).

Seeds: a run trains K seeds as one learner with a leading seed axis (`SeedAxis`): one compiled call per
iteration for all of them, K x n_envs envs in one vector env. A seed that diverges is frozen at its last
finite state and the others train on (rlbench.loop.divergence); with one seed, a divergence ends the run.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

import jax
import numpy as np

from rlbench.errors import RunFailure
from rlbench.loop import collect, updating
from rlbench.loop.evaluation import EvalResult, evaluate_seeds
from rlbench.loop.metrics_log import ProgressBar, log_due
from rlbench.loop.run_state import LoopRun, TrainResult
from rlbench.loop.save_points import save_after_failure, save_final, save_if_due, save_periodic
from rlbench.types import PyTree

OnEval = Callable[[int, list[EvalResult | None]], None]
OnIteration = Callable[[int, PyTree], None]  # (env steps, learner states)


StopRequested = Callable[[], str | None]
Advance = Callable[[LoopRun, "ProgressBar"], None]
# (loop, stop_requested) -> each seed's result; None when a stop cut the evaluation short (nothing recorded)
Evaluate = Callable[[LoopRun, StopRequested | None], list[EvalResult | None] | None]


def host_vector_step(loop: LoopRun, bar: ProgressBar) -> None:
    """The host loop's step: act, step the envs, stage the transitions, train when due."""
    action = collect.act(loop)
    step = collect.step(loop, action)
    collect.stage(loop, action, step)
    if updating.train_if_due(loop, bool(step.done.any())):
        bar.trained(loop.host.env_steps)


def run_loop(
    loop: LoopRun,
    on_eval: OnEval | None = None,
    on_iteration: OnIteration | None = None,
    stop_requested: StopRequested | None = None,
    advance: Advance = host_vector_step,
    evaluate: Evaluate | None = evaluate_seeds,
) -> TrainResult:
    """Train until run.n_timesteps env steps per seed, every seed failed, or a stop is requested; then
    write the final (or, stopped, the interrupt) checkpoints. A RunFailure leaves checkpoints to resume.

    `advance` moves the run on: one vector step here, a chunk of them in the device loop
    (rlbench.loop.device.driver); `evaluate` runs a due evaluation (None: the run has none)."""
    host, run, n_seeds = loop.host, loop.run, loop.axis.n_seeds
    if loop.eval_env is None and evaluate is evaluate_seeds:
        evaluate = None
    start = LoopStart(time.perf_counter(), host.env_steps)
    loop.guard.start(host.env_steps, loop.state, host.metrics)
    interrupted, checkpoints = None, LastCheckpoints(n_seeds)
    try:
        with ProgressBar(run, host.env_steps, n_seeds) as bar:
            if evaluate is not None and evaluation_cut_short(loop):  # by the stop that wrote the checkpoint
                evaluated(bar, host.env_steps, on_eval, evaluate(loop, stop_requested))
            # loop.failed, not host.active: this condition runs every env step, and it is a count.
            while host.env_steps < run.n_timesteps and len(loop.failed) < n_seeds:
                if stop_requested is not None and (interrupted := stop_requested()):
                    break
                advance(loop, bar)
                due = run_what_is_due(loop, bar, start, (on_eval, on_iteration, stop_requested), evaluate)
                checkpoints.keep(due)
        loop.carry = jax.block_until_ready(loop.carry)
        if interrupted:  # a preemption notice leaves seconds: the buffer is stored uncompressed
            checkpoints.keep(save_periodic(loop, with_buffer=True, urgent=True))
        elif host.active.any():
            checkpoints.keep(save_final(loop))
    except RunFailure as error:
        for note in save_after_failure(loop, error):
            error.add_note(note)
        raise
    return TrainResult(
        state=loop.state,
        buffer_state=loop.carry.buffer_state,
        host=host,
        wall_time=time.perf_counter() - start.time,
        interrupted=interrupted,
        checkpoints=checkpoints.paths,
        failed=dict(loop.failed),
    )


def run_what_is_due(
    loop: LoopRun,
    bar: ProgressBar,
    start: LoopStart,
    hooks: tuple[OnEval | None, OnIteration | None, StopRequested | None],
    evaluate: Evaluate | None,
) -> list[Path | None]:
    """After a vector step (the device loop: a chunk): evaluation (with `evaluate`, None: no evaluations), the
    caller's callbacks, logs, a periodic checkpoint, the progress bar, each when due. Returns the checkpoint
    each seed wrote (None: none)."""
    host = loop.host
    on_eval, on_iteration, stop_requested = hooks
    if evaluate is not None and evaluation_due(loop):
        evaluated(bar, host.env_steps, on_eval, evaluate(loop, stop_requested))
    if on_iteration is not None and host.pending.count == 0:
        on_iteration(host.env_steps, loop.state)
    log_due(loop, start.time, start.env_steps)
    written = save_if_due(loop)
    bar.advance(host.env_steps)
    return written


def evaluated(
    bar: ProgressBar, env_steps: int, on_eval: OnEval | None, results: list[EvalResult | None] | None
) -> None:
    """An evaluation's results to the progress bar and the caller; none when a stop cut it short."""
    if results is None:
        return
    means = [result.mean for result in results if result is not None]
    if means:
        bar.evaluated(float(np.mean(means)))
    if on_eval is not None:
        on_eval(env_steps, results)


def evaluation_due(loop: LoopRun) -> bool:
    return loop.host.vector_steps % max(loop.run.eval_freq // loop.run.n_envs, 1) == 0


def evaluation_cut_short(loop: LoopRun) -> bool:
    """Whether a resumed run starts where an evaluation fell due but none was recorded: a stop during the
    evaluation wrote the checkpoint it resumes from. It is made first, as the run would have made it."""
    host = loop.host
    if host.env_steps == 0 or loop.run.eval_freq <= 0 or not evaluation_due(loop):
        return False
    timesteps = [seed.evaluations.timesteps for seed, active in zip(host.seeds, host.active, strict=True) if active]
    return any(not len(steps) or steps[-1] != host.env_steps for steps in timesteps)


class LoopStart(NamedTuple):
    """When (perf_counter) and at how many env steps the loop started: fps in the logs."""

    time: float
    env_steps: int


class LastCheckpoints:
    """The last checkpoint each seed wrote."""

    def __init__(self, n_seeds: int):
        self.paths: list[Path | None] = [None] * n_seeds

    def keep(self, written: list[Path | None]) -> None:
        self.paths = [new or old for new, old in zip(written, self.paths, strict=True)]
