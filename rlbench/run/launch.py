"""Launching a resolved run: from an `Experiment` to its trained seeds, the one way every front end trains.

train.py, a sweep's cell on a Ray worker, an -optimize trial and a `bench speed` row all resolve a
`RunRequest` (rlbench.run.experiment) and call `launch` here: it claims one RL Zoo run folder per seed and
writes its files (rlbench.run.outputs; an in-process run, `RunOutputs.run_folders=False`, claims none),
prints the banner, starts the loggers (progress.csv, the console, TensorBoard, W&B), trains every seed and
returns the outcome, one exit code per seed (rlbench.run.exit_codes) and what stopped it, if anything.
Nothing here reads a command line: the caller says what to record as args.yml and command.txt.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import jax
import numpy as np
import yaml

from rlbench.loggers.base import Logger, MultiLogger
from rlbench.loggers.console import ConsoleLogger
from rlbench.loggers.csv import CSVLogger
from rlbench.loggers.tensorboard import TensorBoardLogger
from rlbench.loggers.tracking import WandbTracker
from rlbench.loop.device.envs import steps_on_device
from rlbench.loop.device.runner import train_seeds_on_device
from rlbench.loop.evaluation import EvalResult
from rlbench.loop.run_state import SeedOutput, TrainResult
from rlbench.loop.runner import train_seeds
from rlbench.loop.saving import CheckpointSettings
from rlbench.redact import redact_values
from rlbench.run.exit_codes import EXIT_INTERRUPTED, STOPPING_ERRORS, exit_code
from rlbench.run.experiment import Experiment
from rlbench.run.final_eval import evaluate_finished_seeds, no_scheduled_evaluation
from rlbench.run.outputs import (
    RunOutputs,
    Tracking,
    model_name,
    plain_yaml,
    prepare_run_dirs,
    record_stop,
    resume_command,
    zoo_args,
)
from rlbench.store.manifest import Group, RunDescription, Spaces, library_versions
from rlbench.types import PyTree


@dataclass(frozen=True)
class Hooks:
    """What a front end follows while its run starts and trains (each optional)."""

    started: Callable[[], None] | None = None  # once the run folders are written (GracefulStop.started)
    stop_requested: Callable[[], str | None] | None = None  # polled every vector step; a reason stops the run
    # (env steps, one result per seed: None for a seed that failed)
    on_eval: Callable[[int, list[EvalResult | None]], None] | None = None
    on_iteration: Callable[[int, PyTree], None] | None = None  # (env steps, learner state), every iteration


@dataclass
class Launched:
    """A launched run's outcome: its run folders, one exit code per seed (0 done, 1 failed or diverged,
    2 a configuration error found late, 75 stopped with a checkpoint, 130 aborted), and either the
    training's result or what stopped it (never raised by `launch`: the front end decides)."""

    run_dirs: list[Path]
    codes: list[int]
    result: TrainResult | None = None
    error: BaseException | None = None
    resume_command: str | None = None  # after a stop that left checkpoints: the command that continues the run


def launch(exp: Experiment, outputs: RunOutputs, hooks: Hooks = Hooks()) -> Launched:
    """Claim and fill the run folders (none in-process), print the banner, start the loggers and W&B, and
    train every seed. W&B runs are finished with their seed's code, whatever happens."""
    launched = Launched([], [1] * exp.n_seeds)
    trackers: list[WandbTracker] = []
    try:
        if outputs.run_folders:
            launched.run_dirs = prepare_run_dirs(exp, outputs, started=hooks.started)
            if outputs.verbose:
                print_banner(exp, launched.run_dirs)
        if outputs.tracking is not None:
            for index, run_dir in enumerate(launched.run_dirs):
                trackers.append(start_tracking(outputs.tracking, outputs, exp, index, run_dir))
        train = train_seeds_on_device if steps_on_device(exp.run.env_id, exp.run.vec_env) else train_seeds
        launched.result = train(
            exp.run,
            exp.algo,
            exp.learner_config,
            seed_outputs(outputs, exp, launched.run_dirs, trackers),
            on_eval=hooks.on_eval,
            on_iteration=hooks.on_iteration,
            resume=exp.resume_seeds or None,
            stop_requested=hooks.stop_requested,
        )
        launched.codes = seed_codes(exp, launched.result)
        if launched.result.interrupted:
            record_stopped(exp, outputs, launched)
        elif outputs.final_evaluation and outputs.run_folders:
            evaluate_finished_seeds(exp.run, launched.result, launched.codes, launched.run_dirs, trackers)
        _summarize_tracking(launched.result, trackers, launched.run_dirs)
    except STOPPING_ERRORS as error:
        launched.error = error
        launched.codes = [exit_code(error, report=False)] * exp.n_seeds
    finally:
        for tracker, code in zip(trackers, launched.codes, strict=False):
            tracker.finish(code)
    return launched


def seed_outputs(
    outputs: RunOutputs, exp: Experiment, run_dirs: Sequence[Path], trackers: Sequence[WandbTracker]
) -> list[SeedOutput]:
    """Every seed's outputs; in-process, no logger and no checkpoint, and a folder only where -optimize's
    --optimization-log-path gives one (its evaluations.npz)."""
    if not outputs.run_folders:
        folders = outputs.seed_folders or (None,) * exp.n_seeds
        return [SeedOutput(lambda names: MultiLogger([]), folder) for folder in folders]
    return [
        seed_output(outputs, exp, index, run_dirs, trackers[index] if trackers else None)
        for index in range(exp.n_seeds)
    ]


def record_stopped(exp: Experiment, outputs: RunOutputs, launched: Launched) -> None:
    """A stop's resume command (from the first seed's checkpoint: a group's resumes the whole group), and
    each run folder's command.txt continuing its run."""
    result = launched.result
    assert result is not None, "a stopped run's training returned"
    written = [path for path in result.checkpoints if path is not None]
    if written:
        launched.resume_command = resume_command(exp, outputs, written[0])
    if launched.run_dirs:
        why = f"stopped by {result.interrupted} at {result.env_steps} env steps"
        record_stop(exp, outputs, launched.run_dirs, result.checkpoints, why)


def seed_codes(exp: Experiment, result: TrainResult) -> list[int]:
    """Each seed's exit code from a training that returned: 1 diverged, else 75 when stopped, else 0."""
    codes = [1 if index in result.failed else 0 for index in range(exp.n_seeds)]
    return [code or EXIT_INTERRUPTED for code in codes] if result.interrupted else codes


def report(exp: Experiment, launched: Launched, verbose: int) -> list[int]:
    """Print how a run with run folders ended (what stopped it; the seeds that diverged; where to resume
    from; what was trained) and return its seeds' exit codes."""
    if launched.error is not None:
        return [exit_code(launched.error)] * exp.n_seeds
    result, run_dirs = launched.result, launched.run_dirs
    assert result is not None, "a launch without an error returned its training's result"
    if result.failed:
        print(f"{len(result.failed)} of {exp.n_seeds} seeds diverged and were frozen:", file=sys.stderr)
        for index, reason in result.failed.items():
            print(f"  seed {exp.seeds[index]} ({run_dirs[index]}): {reason}", file=sys.stderr)
    if result.interrupted:
        written = [path for path in result.checkpoints if path is not None]
        print(
            f"Stopped by {result.interrupted} at {result.env_steps} env steps; "
            f"checkpoint{'s' if len(written) > 1 else ''}: {', '.join(map(str, written))}"
            + (f"\nResume with: {launched.resume_command}" if launched.resume_command else ""),
            file=sys.stderr,
        )
    elif verbose:
        seeds = f" per seed ({exp.n_seeds} seeds)" if exp.n_seeds > 1 else ""
        models = ", ".join(str(path) for path in result.checkpoints if path is not None)
        print(f"Trained {result.env_steps} env steps{seeds} in {result.wall_time:.1f} s; model: {models}")
    return launched.codes


def print_banner(exp: Experiment, run_dirs: Sequence[Path]) -> None:
    """The startup lines: seeds, run folders, what is resumed, and the merged hyperparameters."""
    if exp.n_seeds == 1:
        print(f"Seed: {exp.run.seed}\nLog folder: {run_dirs[0]}")
    else:
        print(f"Seeds: {exp.seeds[0]} to {exp.seeds[-1]}, trained together (group {exp.group_id})")
        print("Log folders: " + ", ".join(str(run_dir) for run_dir in run_dirs))
    if exp.resume is not None:
        counters = exp.resume.manifest.counters
        print(
            f"Resuming from {exp.resume.path}{' and its group' if exp.n_seeds > 1 else ''} at "
            f"{counters.env_steps} env steps ({counters.gradient_steps} gradient steps), until "
            f"{exp.run.n_timesteps}"
        )
        print("Hyperparameters (merged: checkpoint < -params < -n):")
    else:
        name = exp.algo.name
        print(f"Hyperparameters (merged: {name} defaults < {name} preset < {exp.source} < -params < -n):")
    print(yaml.safe_dump(plain_yaml(exp.hyperparams), sort_keys=True), end="", flush=True)
    host = exp.resume.manifest.host if exp.resume is not None else None
    if no_scheduled_evaluation(exp.run, host.env_steps if host else 0, host.vector_steps if host else 0):
        run = exp.run
        print(
            f"Note: no evaluation falls due before this run ends at {run.n_timesteps} env steps (--eval-freq "
            f"{run.eval_freq}): its final model is evaluated at its end instead ({run.eval_episodes} episodes)",
            flush=True,
        )


def start_tracking(tracking: Tracking, outputs: RunOutputs, exp: Experiment, index: int, run_dir: Path) -> WandbTracker:
    """Seed `index`'s W&B run: RL Zoo's name and flags; config = hyperparameters, arguments, seed, command
    line, versions, git commit and backend. The seeds of one process are grouped (the tracking group, by
    default the group id). A resumed run continues the checkpoint's W&B run id."""
    seed = exp.seeds[index]
    name = f"{exp.run.env_id}__{exp.algo.name}__{seed}__{int(time.time())}"
    group = {"group_id": exp.group_id} if exp.n_seeds > 1 else {}
    config = {
        **plain_yaml(exp.hyperparams),
        "algo": exp.algo.name,
        "env_id": exp.run.env_id,
        "seed": seed,
        **group,
        "args": plain_yaml(redact_values({**zoo_args(outputs.saved_args), "seed": seed})),
        "command": outputs.command,
        "versions": library_versions(),
        "git_commit": git_commit(),
        "backend": jax.default_backend(),
        "run_dir": str(run_dir),
    }
    run_id = exp.resume_seeds[index].manifest.run.wandb_run_id if exp.resume_seeds else None
    return WandbTracker(
        project=tracking.project,
        entity=tracking.entity,
        group=tracking.group or exp.group_id,
        tags=list(tracking.tags),
        name=name,
        config=config,
        run_id=run_id,
    )


def git_commit() -> str | None:
    """The project's commit when it runs from a git checkout (None otherwise)."""
    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=Path(__file__).resolve().parent, capture_output=True, text=True, timeout=5
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    commit = out.stdout.strip()
    return commit if out.returncode == 0 and commit else None


def _summarize_tracking(result: TrainResult, trackers: Sequence[WandbTracker], run_dirs: Sequence[Path]) -> None:
    for index, tracker in enumerate(trackers):
        evaluations = result.host.seeds[index].evaluations
        summary: dict[str, float | str] = {"env_steps": result.env_steps, "wall_time_s": result.wall_time}
        if evaluations.results:
            summary |= {
                "final_eval_mean_reward": float(np.mean(evaluations.results[-1])),
                "best_eval_mean_reward": float(max(np.mean(r) for r in evaluations.results)),
            }
        if index in result.failed:
            summary["failed"] = result.failed[index]
        files = [run_dirs[index] / "evaluations.npz", result.checkpoints[index]]
        tracker.summarize(summary, [path for path in files if path is not None], base=run_dirs[index])


def seed_output(
    outputs: RunOutputs, exp: Experiment, index: int, run_dirs: Sequence[Path], tracker: WandbTracker | None
) -> SeedOutput:
    """Seed `index`'s logger (progress.csv, the console for a one-seed run, TensorBoard, W&B), run folder
    and checkpoints, whose manifest names the group and every seed's folder in a run of several seeds."""
    run_dir = run_dirs[index]
    name = model_name(exp)
    group = None
    if exp.n_seeds > 1:
        assert exp.group_id is not None, "a run of several seeds has a group id"
        group = Group(exp.group_id, index, tuple(path.name for path in run_dirs))

    def make_logger(metric_names: Sequence[str]) -> MultiLogger:
        loggers: list[Logger] = [CSVLogger(run_dir / "progress.csv", metric_names)]
        if outputs.verbose and exp.n_seeds == 1:  # several seeds: one console line per evaluation, for all
            loggers.append(ConsoleLogger())
        if outputs.tensorboard_log:
            run_id = run_dir.name[len(name) + 1 :]
            loggers.append(TensorBoardLogger(Path(outputs.tensorboard_log) / name / f"{exp.algo.name}_{run_id}"))
        if tracker is not None:
            loggers.append(tracker)
        return MultiLogger(loggers)

    checkpoints = CheckpointSettings(
        run_dir=run_dir,
        model_name=name,
        save_freq=outputs.save_freq,
        keep=outputs.keep_checkpoints,
        save_replay_buffer=outputs.save_replay_buffer,
        description=RunDescription(
            algo=exp.algo.name,
            env_id=exp.run.env_id,
            seed=exp.seeds[index],
            n_timesteps=exp.run.n_timesteps,
            n_envs=exp.run.n_envs,
            hyperparams=plain_yaml(exp.hyperparams),
            spaces=Spaces.from_json(exp.spaces),
            resumed_from=str(exp.resume_seeds[index].path) if exp.resume_seeds else None,
            wandb_run_id=None if tracker is None else tracker.id,
            group=group,
        ),
    )
    return SeedOutput(make_logger, run_dir, checkpoints)
