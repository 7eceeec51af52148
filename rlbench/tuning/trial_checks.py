"""What a trial's results must show before Optuna is told (rlbench.tuning.tune): each evaluation's score for
the pruner (the mean over the trial's seeds), and the checks that end a trial FAIL instead of COMPLETE."""

from __future__ import annotations

import math

import jax
import numpy as np
import optuna

from rlbench.loop.evaluation import EvalResult
from rlbench.loop.run_state import TrainResult
from rlbench.run.experiment import Experiment


class TrialFailed(Exception):
    """A trial that must end FAIL, not COMPLETE: non-finite results, or past the budget."""


class TrialInterrupted(Exception):
    """SIGINT or SIGTERM stopped the trial before its end: FAIL (Optuna's state for an unfinished trial)."""


def report_evaluation(
    trial: optuna.Trial, exp: Experiment, evaluations: list[float], env_steps: int, results: list[EvalResult | None]
) -> None:
    """An evaluation's score to the pruner: with --n-seeds K the mean over the K seeds, so that one seed's
    luck does not decide which hyperparameters win, and the pruner compares means, not single draws."""
    means: list[float] = []
    for seed, result in zip(exp.seeds, results, strict=True):
        if result is None:
            raise TrialFailed(f"seed {seed} diverged at or before {env_steps} env steps")
        if not math.isfinite(result.mean):
            raise TrialFailed(f"non-finite evaluation return {result.mean} at {env_steps} env steps")
        means.append(result.mean)
    value = float(np.mean(means))
    trial.report(value, len(evaluations))
    evaluations.append(value)
    if len(results) > 1:
        trial.set_user_attr("seed_values", means)
    if trial.should_prune():
        raise optuna.TrialPruned(f"pruned at evaluation {len(evaluations)} ({env_steps} env steps)")


def check_trial_result(exp: Experiment, result: TrainResult, evaluations: list[float]) -> None:
    """TrialFailed for a trial that must not COMPLETE: stopped, non-finite, diverged, or never evaluated."""
    if result.interrupted:
        raise TrialInterrupted(f"{result.interrupted} at {result.env_steps} env steps")
    parameters = exp.algo.make_learner(exp.learner_config, exp.env_spec).parameters(result.state)
    if not all(bool(jax.numpy.isfinite(leaf).all()) for leaf in jax.tree_util.tree_leaves(parameters)):
        raise TrialFailed("non-finite parameters after training")
    if result.failed:
        seeds = ", ".join(str(exp.seeds[index]) for index in result.failed)
        raise TrialFailed(f"seeds {seeds} diverged: {next(iter(result.failed.values()))}")
    if not evaluations:
        raise TrialFailed("no evaluation ran (n_timesteps smaller than the evaluation interval?)")
