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

import contextlib
import dataclasses
import json
import multiprocessing
import multiprocessing.synchronize
import os
import shlex
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TypedDict

import numpy as np
import optuna

from rlbench.envs.make import env_file_name
from rlbench.errors import ConfigError, RunFailure
from rlbench.redact import redact, redact_argv
from rlbench.run.experiment import Experiment, RunRequest, resolve
from rlbench.run.launch import Hooks, launch
from rlbench.run.outputs import RunOutputs
from rlbench.tuning import HEARTBEAT_S, spaces
from rlbench.tuning.processes import (
    EXIT_INTERRUPTED,
    StopSignal,
    exit_with_parent,
    failures_in_one_line,
    join_workers,
    worker_id,
)
from rlbench.tuning.samplers import SAMPLERS, Sampler, fetch_auto_sampler, make_sampler
from rlbench.tuning.stored import trained_hyperparams
from rlbench.tuning.study import (
    PRUNERS,
    SURPLUS_ATTR,
    Heartbeat,
    Pruner,
    budget_left,
    create_or_load,
    fail_stale_journal_trials,
    is_rdb,
    is_surplus,
    make_pruner,
    make_storage,
    n_counted,
    storage_url,
    study_name,
    write_report,
)
from rlbench.tuning.trial_checks import TrialFailed, TrialInterrupted, check_trial_result, report_evaluation


@dataclass(frozen=True)
class TuningOptions:
    """How to search (train.py's tuning flags); what each trial trains is the RunRequest."""

    n_trials: int  # trials this invocation runs, over all workers
    n_jobs: int  # worker processes, this one included
    max_total_trials: int | None  # the study's budget: COMPLETE, PRUNED and FAIL trials
    heartbeat_grace: int  # seconds a RUNNING trial may stay silent before it counts as a dead worker's
    sampler: Sampler
    pruner: Pruner
    n_startup_trials: int
    n_evaluations: int | None  # None: one per 100k steps
    optimization_log_path: str | None  # each trial's files under PATH/trial_<n>; None: none written
    optim_plots: bool
    banner: str = ""  # printed once the input is checked (the compile cache's line): an error line comes first


# What a trial may end with (FAIL, one line each), and the study goes on.
EXPECTED_FAILURES = (TrialFailed, TrialInterrupted, ConfigError, RunFailure)


def trial_seed(seed: int, number: int) -> int:
    """Distinct, reproducible seeds per (study seed, trial number)."""
    return int(np.random.SeedSequence([seed, number]).generate_state(1)[0] % (2**31 - 1))


def check_tuning_options(request: RunRequest, options: TuningOptions) -> None:
    if request.algo not in spaces.SPACES:
        raise ConfigError(f"-optimize: no search space for {request.algo!r} (spaces: {', '.join(spaces.SPACES)})")
    if options.sampler not in SAMPLERS:
        raise ConfigError(f"--sampler {options.sampler!r}: valid: {', '.join(SAMPLERS)}")
    if options.pruner not in PRUNERS:
        raise ConfigError(f"--pruner {options.pruner!r}: valid: {', '.join(PRUNERS)}")
    for name in ("n_trials", "n_jobs"):
        if getattr(options, name) < 1:
            raise ConfigError(f"--{name.replace('_', '-')}: expected a positive integer, got {getattr(options, name)}")
    if options.max_total_trials is not None and options.max_total_trials < 1:
        raise ConfigError(f"--max-total-trials: expected a positive integer, got {options.max_total_trials}")
    if options.heartbeat_grace < 2 * HEARTBEAT_S:
        raise ConfigError(
            f"--heartbeat-grace: expected at least {2 * HEARTBEAT_S} s (twice the {HEARTBEAT_S} s heartbeat "
            f"interval), got {options.heartbeat_grace}"
        )
    if options.n_evaluations is not None and options.n_evaluations < 1:
        raise ConfigError(f"--n-evaluations: expected a positive integer, got {options.n_evaluations}")
    if request.storage and request.storage.startswith("sqlite") and options.n_jobs > 1:
        print(
            "Warning: SQLite serialises writers and can raise 'database is locked' with several workers "
            "(Optuna's guidance); prefer the default journal file or PostgreSQL",
            file=sys.stderr,
        )


def optimize(request: RunRequest, options: TuningOptions, argv: Sequence[str]) -> int:
    """Run the study; write the report; 0 with a completed trial, 1 without ("no completed trials"),
    75 when SIGINT or SIGTERM stopped it. `argv` is the command line, stored (credentials masked) in the study."""
    check_tuning_options(request, options)
    exp = resolve(request)  # validates the file, the env and -params once, before any trial or file
    if options.sampler == "auto":
        fetch_auto_sampler()
    env_name = env_file_name(exp.run.env_id)
    plan = study_plan(request, options, exp, env_name)
    study = create_or_load(make_storage(plan["storage"], grace_s=plan["grace"]), plan["study"], plan["storage"])
    study.set_user_attr("command", shlex.join(["python", "train.py", *redact_argv(argv)]))
    if options.banner:
        print(options.banner)
    print(
        f"Study {plan['study']} in {redact(plan['storage'])}: {options.n_trials} trials on {options.n_jobs} worker(s), "
        f"sampler {options.sampler}, pruner {options.pruner}, {plan['n_evaluations']} evaluation(s) per trial, "
        f"seed {plan['seed']}"
    )
    shares = [
        options.n_trials // options.n_jobs + (i < options.n_trials % options.n_jobs) for i in range(options.n_jobs)
    ]
    context = multiprocessing.get_context("spawn")  # never fork a process that runs JAX
    stop = StopSignal(context.Event(), announce=True)
    workers = [
        context.Process(
            target=worker_main,
            args=(request, options, plan, i, shares[i], os.getpid(), stop.event),
            daemon=False,
        )
        for i in range(1, options.n_jobs)
        if shares[i] > 0
    ]
    with stop:
        try:
            for worker in workers:
                worker.start()
            run_worker(request, options, plan, 0, shares[0], stop)
        except BaseException:
            stop.request("error")  # this process is going down: so are its workers
            raise
        finally:
            workers_interrupted = join_workers(workers, study, stop)
        # Still under the handlers: a second signal must not cut the report short.
        return report(request, options, exp, study, env_name, interrupted=stop() is not None or workers_interrupted)


class StudyPlan(TypedDict):
    """What every worker needs to run trials (a plain dict: it goes to the spawned workers as it is)."""

    storage: str  # the study's storage URL or journal path
    study: str  # its name
    seed: int  # the seed trials derive theirs from
    n_evaluations: int  # per trial
    eval_freq: int  # each trial's --eval-freq: n_evaluations per trial
    budget: int | None  # --max-total-trials
    grace: int  # --heartbeat-grace


def study_plan(request: RunRequest, options: TuningOptions, exp: Experiment, env_name: str) -> StudyPlan:
    """What every worker needs to run trials: the study (storage, name, budget, heartbeat grace), the seed
    trials derive theirs from, and each trial's evaluations (--n-evaluations, by default one per 100k steps)."""
    n_evaluations = options.n_evaluations or max(1, exp.run.n_timesteps // 100_000)
    return StudyPlan(
        storage=storage_url(request, env_name),
        study=study_name(request, env_name),
        seed=exp.run.seed,
        n_evaluations=n_evaluations,
        eval_freq=max(exp.run.n_timesteps // n_evaluations, 1),  # each trial's: n_evaluations per trial
        budget=options.max_total_trials,
        grace=options.heartbeat_grace,
    )


def worker_main(
    request: RunRequest,
    options: TuningOptions,
    plan: StudyPlan,
    index: int,
    n_trials: int,
    parent_pid: int,
    stop_event: multiprocessing.synchronize.Event,
) -> None:
    """A spawned worker process: exit 75 when a stop was requested."""
    exit_with_parent(parent_pid)
    with StopSignal(stop_event) as stop:
        run_worker(request, options, plan, index, n_trials, stop)
    if stop():
        sys.exit(EXIT_INTERRUPTED)


def report(
    request: RunRequest,
    options: TuningOptions,
    exp: Experiment,
    study: optuna.Study,
    env_name: str,
    *,
    interrupted: bool,
) -> int:
    stem = (
        f"report_{env_name}_{options.n_trials}-trials-{exp.run.n_timesteps}-{options.sampler}-{options.pruner}_"
        f"{int(time.time())}"
    )
    paths = write_report(
        study,
        Path(request.log_folder) / request.algo,
        stem,
        request.algo,
        exp.run.env_id,
        exp.hyperparams,
        plots=options.optim_plots,
    )
    states: dict[str, int] = {}
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
    print(f"Best trial {best.number}: value {best.value:.2f}, hyperparameters {trained_hyperparams(best)}")
    return 0


def run_worker(
    request: RunRequest, options: TuningOptions, plan: StudyPlan, index: int, n_trials: int, stop: StopSignal
) -> None:
    """One worker: trials one at a time until `n_trials` ran, the study's budget is reached or a stop is requested."""
    sampler = make_sampler(options.sampler, plan["seed"], options.n_startup_trials)
    pruner = make_pruner(options.pruner, options.n_startup_trials, plan["n_evaluations"])
    # The main process created the study: loading it here keeps Optuna's "study created/used" line to one.
    study = optuna.load_study(
        study_name=plan["study"],
        storage=make_storage(plan["storage"], grace_s=plan["grace"]),
        sampler=sampler,
        pruner=pruner,
    )
    objective = Objective(request, options.optimization_log_path, plan, study, stop)
    failures_in_one_line(EXPECTED_FAILURES)
    ran = 0
    while ran < n_trials and not stop():
        fail_stale_trials(study, index, plan["grace"])
        if budget_left(study, plan["budget"]):
            try:
                study.optimize(objective, n_trials=1, catch=EXPECTED_FAILURES)
            except (optuna.exceptions.UpdateFinishedTrialError, ValueError):
                # Optuna could not report or tell the trial because it had already finished: another worker
                # found it silent for --heartbeat-grace (a starved heartbeat on an overloaded machine) and failed it;
                # its retry runs there. This worker goes on.
                assert objective.trial_id is not None, "Optuna's tell fails after the objective started the trial"
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
    def __init__(
        self,
        request: RunRequest,
        log_path: str | None,
        plan: StudyPlan,
        study: optuna.Study,
        stop: StopSignal,
    ):
        self.request, self.log_path, self.plan, self.study, self.stop = request, log_path, plan, study, stop
        self.trial_id: int | None = None  # the trial being (or last) run, and its number
        self.trial_number: int | None = None

    def trial_folder(self, trial: optuna.Trial, seed: int, exp: Experiment) -> Path | None:
        """--optimization-log-path: PATH/trial_<n> (PATH/trial_<n>/seed_<s> for each seed of several)."""
        if not self.log_path:
            return None
        folder = Path(self.log_path) / f"trial_{trial.number}"
        if exp.n_seeds > 1:
            folder = folder / f"seed_{seed}"
        folder.mkdir(parents=True, exist_ok=True)
        return folder

    def __call__(self, trial: optuna.Trial) -> float:
        plan = self.plan
        self.trial_id, self.trial_number = trial._trial_id, trial.number
        if is_surplus(self.study, trial, plan["budget"]):
            trial.set_user_attr(SURPLUS_ATTR, True)
            raise TrialFailed(f"trial {trial.number} started past --max-total-trials {plan['budget']}")
        seed = trial_seed(plan["seed"], trial.number)
        trial.set_user_attr("seed", seed)
        trial.set_user_attr("worker", worker_id())
        hyperparams = spaces.sample(self.request.algo, trial)
        trial.set_user_attr("hyperparams", hyperparams)
        request = dataclasses.replace(self.request, seed=seed, verbose=0, progress=False, eval_freq=plan["eval_freq"])
        exp = resolve(request, trial_overrides=hyperparams)  # ConfigError: this trial FAILs (E7)
        trial.set_user_attr("config", json.loads(json.dumps(exp.hyperparams, default=list)))  # what ran
        # In-process: no run folder, no logger; --optimization-log-path keeps each seed's evaluations.npz.
        outputs = RunOutputs(run_folders=False, seed_folders=tuple(self.trial_folder(trial, s, exp) for s in exp.seeds))
        evaluations: list[float] = []
        hooks = Hooks(stop_requested=self.stop, on_eval=partial(report_evaluation, trial, exp, evaluations))
        # RDB storages get Optuna's own heartbeat from study.optimize.
        heartbeat = contextlib.nullcontext() if is_rdb(self.study._storage) else Heartbeat(self.study, trial)
        with heartbeat:
            launched = launch(exp, outputs, hooks)
        if launched.error is not None:  # pruned, failed or stopped: Optuna records it (run_worker's `catch`)
            raise launched.error
        assert launched.result is not None, "a launch without an error returned its training's result"
        check_trial_result(exp, launched.result, evaluations)
        if self.study._storage.get_trial(trial._trial_id).state != optuna.trial.TrialState.RUNNING:
            # Failed as stale by another worker meanwhile: fail here too, so that Optuna's tell reports
            # the finished trial (UpdateFinishedTrialError, handled by run_worker) instead of asserting.
            raise TrialFailed(f"trial {trial.number} was failed by another worker while it ran")
        return evaluations[-1]
