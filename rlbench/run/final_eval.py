"""The evaluation at a run's end, when none of its scheduled ones (every `--eval-freq` env steps) fell on its
last env step: a run shorter than `--eval-freq` has no evaluation otherwise, and a longer one's last is up to
`--eval-freq` steps old. The final model is evaluated once more, as the loop's next evaluation would have been
(the same number of episodes, deterministic, the eval env's next seeds), after training: nothing it does
touches the training's random streams, so a run stopped and resumed still ends bit for bit as one never
stopped. train.py records it in the run folder (evaluations.npz, progress.csv, the console, W&B); a sweep
keeps it in its manifest (rlbench.sweep.final_eval).
"""

from __future__ import annotations

import csv
import math
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TypedDict

from rlbench.config.entry import RunConfig
from rlbench.envs.make import close_vector_env, eval_vec_env, make_vector_env
from rlbench.envs.reported import reports_episodes
from rlbench.loggers.base import STEP_KEY
from rlbench.loggers.tracking import WandbTracker
from rlbench.loop.evaluation import EVAL_SEED_OFFSET, EvalResult, eval_metrics, evaluate
from rlbench.loop.run_state import TrainResult
from rlbench.run.policy import load_policy
from rlbench.store.checkpoint import Checkpoint, read_checkpoint


def final_model_evaluation(run: RunConfig, checkpoint: Checkpoint) -> EvalResult | None:
    """The final model `checkpoint` evaluated with `run`'s evaluation settings; None when its run was
    evaluated at its last env step already."""
    env_steps = checkpoint.manifest.counters.env_steps
    evaluated = checkpoint.arrays.get("host/eval_timesteps")
    n_evaluations = 0 if evaluated is None else len(evaluated)
    if evaluated is not None and n_evaluations and int(evaluated[-1]) == env_steps:
        return None
    seed = checkpoint.manifest.run.seed
    kwargs = run.env_kwargs if run.eval_env_kwargs is None else run.eval_env_kwargs
    vec_env = eval_vec_env(run.vec_env)
    env = make_vector_env(run.env_id, run.n_eval_envs, vec_env, kwargs, run.env_wrappers, run.gym_packages)
    failed = True
    try:
        policy = load_policy(checkpoint, seed=seed)
        eval_seed = seed + EVAL_SEED_OFFSET + n_evaluations
        result = evaluate(policy, env, run.eval_episodes, eval_seed, reports_episodes(run.env_wrappers))
        failed = False
    finally:
        close_vector_env(env, failed)
    return result


def no_scheduled_evaluation(run: RunConfig, env_steps: int, vector_steps: int) -> bool:
    """True when evaluations are on (--eval-freq > 0) but none falls due between the run's start (`env_steps`,
    `vector_steps`: 0, or a checkpoint's) and its end: the loop evaluates after each vector step that is a
    multiple of --eval-freq // n_envs."""
    if run.eval_freq <= 0 or env_steps >= run.n_timesteps:
        return False
    interval = max(run.eval_freq // run.n_envs, 1)
    last = vector_steps + math.ceil((run.n_timesteps - env_steps) / run.n_envs)
    return last // interval == vector_steps // interval


def evaluate_finished_seeds(
    run: RunConfig,
    result: TrainResult,
    codes: Sequence[int],
    run_dirs: Sequence[Path],
    trackers: Sequence[WandbTracker],
) -> None:
    """Each seed that finished (exit code 0) with no evaluation at its last env step: its final model
    evaluated and recorded. One that fails here leaves a note on stderr, not a failed run: the training is
    complete and its final model written."""
    if run.eval_freq <= 0:  # --eval-freq -1: the user asked for no evaluation
        return
    for index, (code, run_dir, model) in enumerate(zip(codes, run_dirs, result.checkpoints, strict=True)):
        if code != 0 or model is None:
            continue
        try:
            evaluation = final_model_evaluation(run, read_checkpoint(model, load_replay_buffer=False))
            if evaluation is not None:
                record(run, result, index, evaluation, run_dir, trackers[index] if trackers else None)
        except Exception as error:  # an env or a file that fails here must not fail the finished run
            print(f"note: no final evaluation of {run_dir} ({type(error).__name__}: {error})", file=sys.stderr)


def record(
    run: RunConfig, result: TrainResult, index: int, evaluation: EvalResult, run_dir: Path, tracker: WandbTracker | None
) -> None:
    """Seed `index`'s final evaluation into its evaluations.npz (after the carried history), a progress.csv
    row, the console and W&B, with the eval/ metrics a scheduled evaluation logs."""
    steps, evaluations = result.env_steps, result.host.seeds[index].evaluations
    evaluations.append(steps, evaluation.returns, evaluation.lengths)
    evaluations.save(run_dir / "evaluations.npz")
    metrics = eval_metrics(evaluation)
    append_progress_row(run_dir / "progress.csv", {**metrics, STEP_KEY: steps})
    if tracker is not None:
        tracker.log({**metrics, STEP_KEY: steps}, steps)
        tracker.summarize({"final_eval": final_eval_record(steps, evaluation)}, [], run_dir)
    if run.verbose:
        seed = f" (seed {result.host.seeds[index].seed})" if len(result.host.seeds) > 1 else ""
        print(
            f"Final evaluation{seed} at {steps} env steps: episode_reward={evaluation.mean:.2f} "
            f"+/- {evaluation.std:.2f}",
            flush=True,
        )


class FinalEval(TypedDict):
    """The final evaluation as the sweep's manifest and W&B keep it (a mean: a bounded size per run)."""

    env_steps: int
    mean_return: float
    episodes: int


def final_eval_record(env_steps: int, evaluation: EvalResult) -> FinalEval:
    """The final evaluation as the sweep's manifest and W&B keep it (a mean: a bounded size per run)."""
    return {"env_steps": env_steps, "mean_return": evaluation.mean, "episodes": len(evaluation.returns)}


def append_progress_row(path: Path, metrics: dict[str, float | int]) -> None:
    """One row of `metrics` at the end of progress.csv, under the header the run wrote (its logger is
    closed by now); columns not given stay empty."""
    with path.open(newline="") as file:
        columns = next(csv.reader(file))
    with path.open("a", newline="") as file:
        csv.DictWriter(file, fieldnames=columns, restval="").writerow(metrics)
