"""`train.py -optimize`: trials run in-process through the same resolve-and-train path as train.py.

Each worker process (--n-jobs of them; more may run on other machines against the same storage)
loads the study and runs trials one at a time until its share of --n-trials is done or the study's
--max-total-trials is reached. A trial: sample hyperparameters (spaces.py), merge them between the
hyperparameter file and -params, seed the run with (seed, trial number), train, report every
evaluation to the pruner, and return the last evaluation's mean return. A non-finite return or
parameter fails the trial; so does a sampled combination the config rejects (the study goes on).

SIGINT and SIGTERM (to the main process, to a worker or to the whole process group) stop every
running trial at its next env step as FAIL; no new trial starts, the report is written and the exit
code is 75. Workers never outlive the main process, even one killed with SIGKILL.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import dataclasses
import json
import math
import multiprocessing
import os
import shlex
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import jax
import numpy as np
import optuna

from rlbench.errors import ConfigError, RunFailure
from rlbench.loggers.base import MultiLogger
from rlbench.redact import redact, redact_argv
from rlbench.runner import train
from rlbench.tuning import HEARTBEAT_S, spaces
from rlbench.tuning.processes import EXIT_INTERRUPTED, StopSignal, exit_with_parent, join_workers, worker_id
from rlbench.tuning.samplers import SAMPLERS, fetch_auto_sampler, make_sampler
from rlbench.tuning.study import (
    PRUNERS,
    SURPLUS_ATTR,
    Heartbeat,
    StorageUnavailable,
    budget_left,
    create_or_load,
    fail_stale_journal_trials,
    is_rdb,
    is_surplus,
    make_pruner,
    make_storage,
    n_counted,
    write_report,
)


class TrialFailed(Exception):
    """A trial that must end FAIL, not COMPLETE: non-finite results, or past the budget."""


class TrialInterrupted(Exception):
    """SIGINT or SIGTERM stopped the trial before its end: FAIL (Optuna's state for an unfinished trial)."""


def storage_url(args: argparse.Namespace, env_name: str) -> str:
    return args.storage or str(Path(args.log_folder) / args.algo / f"optuna_{env_name}.log")


def study_name(args: argparse.Namespace, env_name: str) -> str:
    return args.study_name or f"{args.algo}_{env_name}"


def trial_seed(seed: int, number: int) -> int:
    """Distinct, reproducible seeds per (study seed, trial number)."""
    return int(np.random.SeedSequence([seed, number]).generate_state(1)[0] % (2**31 - 1))


def load_trial(args: argparse.Namespace, env_name: str) -> tuple[dict[str, Any], int | None]:
    """--trial-id N: trial N's hyperparameters and seed; ConfigError listing what exists when it does not (E8)."""
    from rlbench.tuning.study import load_existing

    url = storage_url(args, env_name)
    if "://" not in url and not Path(url).exists():
        raise ConfigError(f"--trial-id: no study storage at {redact(url)} (give --storage)")
    try:
        storage = make_storage(url)
    except StorageUnavailable as error:  # train.py shows a ConfigError as one line, before any run folder
        raise ConfigError(f"--trial-id: {error}") from None
    study = load_existing(storage, study_name(args, env_name), redact(url))
    trials = {t.number: t for t in study.get_trials(deepcopy=False)}
    if args.trial_id not in trials:
        raise ConfigError(
            f"--trial-id {args.trial_id}: no such trial in study {study.study_name!r}; trials: "
            f"{', '.join(f'{n} ({t.state.name})' for n, t in sorted(trials.items())) or 'none'}"
        )
    trial = trials[args.trial_id]
    hyperparams = dict(trial.user_attrs.get("hyperparams") or spaces.to_hyperparams(args.algo, trial.params))
    return hyperparams, trial.user_attrs.get("seed")


def check_tuning_args(args: argparse.Namespace) -> None:
    if args.algo not in spaces.SPACES:
        raise ConfigError(f"-optimize: no search space for {args.algo!r} (spaces: {', '.join(spaces.SPACES)})")
    if args.sampler not in SAMPLERS:
        raise ConfigError(f"--sampler {args.sampler!r}: valid: {', '.join(SAMPLERS)}")
    if args.pruner not in PRUNERS:
        raise ConfigError(f"--pruner {args.pruner!r}: valid: {', '.join(PRUNERS)}")
    for name in ("n_trials", "n_jobs"):
        if getattr(args, name) < 1:
            raise ConfigError(f"--{name.replace('_', '-')}: expected a positive integer, got {getattr(args, name)}")
    if args.max_total_trials is not None and args.max_total_trials < 1:
        raise ConfigError(f"--max-total-trials: expected a positive integer, got {args.max_total_trials}")
    if args.heartbeat_grace < 2 * HEARTBEAT_S:
        raise ConfigError(
            f"--heartbeat-grace: expected at least {2 * HEARTBEAT_S} s (twice the {HEARTBEAT_S} s heartbeat "
            f"interval), got {args.heartbeat_grace}"
        )
    if args.n_evaluations is not None and args.n_evaluations < 1:
        raise ConfigError(f"--n-evaluations: expected a positive integer, got {args.n_evaluations}")
    if args.storage and args.storage.startswith("sqlite") and args.n_jobs > 1:
        print(
            "Warning: SQLite serialises writers and can raise 'database is locked' with several workers "
            "(Optuna's guidance); prefer the default journal file or PostgreSQL",
            file=sys.stderr,
        )


def optimize(args: argparse.Namespace, resolve, argv: Sequence[str]) -> int:
    """Run the study; write the report; 0 with a completed trial, 1 without ("no completed trials"),
    75 when SIGINT or SIGTERM stopped it. `argv` is the command line, stored (credentials masked) in the study."""
    check_tuning_args(args)
    exp = resolve(args)  # validates the file, the env and -params once, before any trial or file
    if args.sampler == "auto":
        fetch_auto_sampler()
    env_name = exp.run.env_id.replace(":", "_")
    seed = exp.run.seed
    n_evaluations = args.n_evaluations or max(1, exp.run.n_timesteps // 100_000)
    plan = dict(
        storage=storage_url(args, env_name),
        study=study_name(args, env_name),
        seed=seed,
        n_evaluations=n_evaluations,
        budget=args.max_total_trials,
        grace=args.heartbeat_grace,
    )
    study = create_or_load(make_storage(plan["storage"], grace_s=plan["grace"]), plan["study"])
    study.set_user_attr("command", shlex.join(["python", "train.py", *redact_argv(argv)]))
    print(
        f"Study {plan['study']} in {redact(plan['storage'])}: {args.n_trials} trials on {args.n_jobs} worker(s), "
        f"sampler {args.sampler}, pruner {args.pruner}, {n_evaluations} evaluation(s) per trial, seed {seed}"
    )
    shares = [args.n_trials // args.n_jobs + (i < args.n_trials % args.n_jobs) for i in range(args.n_jobs)]
    context = multiprocessing.get_context("spawn")  # never fork a process that runs JAX
    stop = StopSignal(context.Event(), announce=True)
    workers = [
        context.Process(target=worker_main, args=(args, plan, i, shares[i], os.getpid(), stop.event), daemon=False)
        for i in range(1, args.n_jobs)
        if shares[i] > 0
    ]
    with stop:
        try:
            for worker in workers:
                worker.start()
            run_worker(args, plan, 0, shares[0], resolve, stop)
        except BaseException:
            stop.request("error")  # this process is going down: so are its workers
            raise
        finally:
            workers_interrupted = join_workers(workers, study, stop)
        # Still under the handlers: a second signal must not cut the report short.
        return report(args, exp, study, env_name, interrupted=stop() is not None or workers_interrupted)


def worker_main(
    args: argparse.Namespace, plan: dict[str, Any], index: int, n_trials: int, parent_pid: int, stop_event: Any
) -> None:
    """A spawned worker process: exit 75 when a stop was requested."""
    exit_with_parent(parent_pid)
    from rlbench.cli.train import resolve

    with StopSignal(stop_event) as stop:
        run_worker(args, plan, index, n_trials, resolve, stop)
    if stop():
        sys.exit(EXIT_INTERRUPTED)


def report(args, exp, study: optuna.Study, env_name: str, *, interrupted: bool) -> int:
    stem = (
        f"report_{env_name}_{args.n_trials}-trials-{exp.run.n_timesteps}-{args.sampler}-{args.pruner}_"
        f"{int(time.time())}"
    )
    paths = write_report(
        study,
        Path(args.log_folder) / args.algo,
        stem,
        args.algo,
        exp.run.env_id,
        exp.hyperparams,
        plots=not args.no_optim_plots,
    )
    states = {}
    for t in study.get_trials(deepcopy=False):
        states[t.state.name] = states.get(t.state.name, 0) + 1
    print(
        f"Trials: {', '.join(f'{n} {s}' for s, n in sorted(states.items()))}; counted toward the budget: "
        f"{n_counted(study)}"
    )
    for name, path in paths.items():
        print(f"Report ({name}): {path}")
    if interrupted:
        return EXIT_INTERRUPTED
    complete = [t for t in study.get_trials(deepcopy=False) if t.state == optuna.trial.TrialState.COMPLETE]
    if not complete:
        print("error: no completed trials (all pruned or failed); the report above lists them", file=sys.stderr)
        return 1
    best = study.best_trial
    print(f"Best trial {best.number}: value {best.value:.2f}, hyperparameters {best.user_attrs.get('hyperparams')}")
    return 0


def run_worker(
    args: argparse.Namespace, plan: dict[str, Any], index: int, n_trials: int, resolve, stop: StopSignal
) -> None:
    """One worker: trials one at a time until `n_trials` ran, the study's budget is reached or a stop is requested."""
    sampler = make_sampler(args.sampler, plan["seed"], args.n_startup_trials)
    pruner = make_pruner(args.pruner, args.n_startup_trials, plan["n_evaluations"])
    # The main process created the study: loading it here keeps Optuna's "study created/used" line to one.
    study = optuna.load_study(
        study_name=plan["study"],
        storage=make_storage(plan["storage"], grace_s=plan["grace"]),
        sampler=sampler,
        pruner=pruner,
    )
    objective = Objective(args, plan, study, resolve, stop)
    ran = 0
    while ran < n_trials and not stop():
        fail_stale_trials(study, index, plan["grace"])
        if budget_left(study, plan["budget"]):
            try:
                study.optimize(objective, n_trials=1, catch=(TrialFailed, TrialInterrupted, ConfigError, RunFailure))
            except (optuna.exceptions.UpdateFinishedTrialError, ValueError):
                # Optuna could not report or tell the trial because it had already finished: another worker
                # found it silent for --heartbeat-grace (a starved heartbeat on an overloaded machine) and failed it;
                # its retry runs there. This worker goes on.
                if not study._storage.get_trial(objective.trial_id).state.is_finished():
                    raise
                print(
                    f"Worker {index}: trial {objective.trial_number} was failed as stale by another worker, "
                    "its result dropped",
                    flush=True,
                )
            ran += 1
        elif study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.RUNNING,)):
            # The running trials hold the last places; one may still fail or belong to a dead worker,
            # whose retry this worker should then run: wait and look again.
            time.sleep(HEARTBEAT_S)
        else:
            break


def fail_stale_trials(study: optuna.Study, index: int, grace_s: int) -> None:
    """Trials of dead workers: Optuna's heartbeat check for RDB storages, rlbench's for journals."""
    if is_rdb(study._storage):
        optuna.storages.fail_stale_trials(study)
        return
    stale = fail_stale_journal_trials(study, grace_s)
    if stale:
        print(f"Worker {index}: trials {stale} had no heartbeat for {grace_s} s: FAIL, retried once", flush=True)


class Objective:
    def __init__(self, args, plan, study, resolve, stop: StopSignal):
        self.args, self.plan, self.study, self.resolve, self.stop = args, plan, study, resolve, stop
        self.trial_id: int | None = None  # the trial being (or last) run, and its number
        self.trial_number: int | None = None

    def __call__(self, trial: optuna.Trial) -> float:
        args, plan = self.args, self.plan
        self.trial_id, self.trial_number = trial._trial_id, trial.number
        if is_surplus(self.study, trial, plan["budget"]):
            trial.set_user_attr(SURPLUS_ATTR, True)
            raise TrialFailed(f"trial {trial.number} started past --max-total-trials {plan['budget']}")
        seed = trial_seed(plan["seed"], trial.number)
        trial.set_user_attr("seed", seed)
        trial.set_user_attr("worker", worker_id())
        hyperparams = spaces.sample(args.algo, trial)
        trial.set_user_attr("hyperparams", hyperparams)
        trial_args = copy.copy(args)
        trial_args.seed, trial_args.verbose, trial_args.progress = seed, 0, False
        trial_args.optimize_hyperparameters, trial_args.track, trial_args.tensorboard_log = False, False, ""
        exp = self.resolve(trial_args, trial_overrides=hyperparams)  # ConfigError: this trial FAILs (E7)
        trial.set_user_attr("config", json.loads(json.dumps(exp.hyperparams, default=list)))  # what ran
        eval_freq = max(exp.run.n_timesteps // plan["n_evaluations"], 1)
        run = dataclasses.replace(exp.run, eval_freq=eval_freq)
        run_dir = None
        if args.optimization_log_path:
            run_dir = Path(args.optimization_log_path) / f"trial_{trial.number}"
            run_dir.mkdir(parents=True, exist_ok=True)
        evaluations: list[float] = []

        def on_eval(env_steps: int, result) -> None:
            if not math.isfinite(result.mean):
                raise TrialFailed(f"non-finite evaluation return {result.mean} at {env_steps} env steps")
            trial.report(result.mean, len(evaluations))
            evaluations.append(result.mean)
            if trial.should_prune():
                raise optuna.TrialPruned(f"pruned at evaluation {len(evaluations)} ({env_steps} env steps)")

        # RDB storages get Optuna's own heartbeat from study.optimize.
        heartbeat = contextlib.nullcontext() if is_rdb(self.study._storage) else Heartbeat(self.study, trial)
        with heartbeat:
            result = train(
                run,
                exp.algo,
                exp.learner_config,
                lambda names: MultiLogger([]),
                run_dir=run_dir,
                on_eval=on_eval,
                stop_requested=self.stop,
            )
        if result.interrupted:
            raise TrialInterrupted(f"{result.interrupted} at {result.env_steps} env steps")
        if not all(
            bool(jax.numpy.isfinite(leaf).all())
            for leaf in jax.tree_util.tree_leaves((result.state.actor.params, result.state.critic.params))
        ):
            raise TrialFailed("non-finite parameters after training")
        if not evaluations:
            raise TrialFailed("no evaluation ran (n_timesteps smaller than the evaluation interval?)")
        if self.study._storage.get_trial(trial._trial_id).state != optuna.trial.TrialState.RUNNING:
            # Failed as stale by another worker meanwhile: fail here too, so that Optuna's tell reports
            # the finished trial (UpdateFinishedTrialError, handled by run_worker) instead of asserting.
            raise TrialFailed(f"trial {trial.number} was failed by another worker while it ran")
        return evaluations[-1]
