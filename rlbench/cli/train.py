"""`python train.py`: RL Zoo's training command line on rlbench's learners.

Exit codes: 0 success; 1 runtime failure (a failed env worker, a corrupt checkpoint given to `-i`);
2 usage or configuration error (raised before any file is written or env stepped); 75 stopped by
SIGINT or SIGTERM after writing a checkpoint to resume from (EX_TEMPFAIL: try again).
"""

from __future__ import annotations

import argparse
import shlex
import sys
from collections.abc import Sequence
from typing import Any

from rlbench.cli.flags import flag, parser_from, shared, str2bool
from rlbench.envs.make import VEC_ENV_KINDS
from rlbench.errors import ConfigError
from rlbench.loggers.tensorboard import import_tensorboardx
from rlbench.loggers.tracking import import_wandb
from rlbench.redact import redact_argv
from rlbench.run import compile_cache
from rlbench.run.cost import learner_summary
from rlbench.run.exit_codes import EXIT_INTERRUPTED, STOPPING_ERRORS, exit_code, run_exit_code
from rlbench.run.experiment import RunRequest, resolve
from rlbench.run.launch import Hooks, launch, report
from rlbench.run.outputs import RunOutputs, Tracking
from rlbench.run.signals import GracefulStop
from rlbench.tuning import GRACE_S, HEARTBEAT_S

__all__ = ["EXIT_INTERRUPTED", "build_parser", "main", "request_from_args"]


# RL Zoo flags whose features later work brings (tracking, tuning). Accepted so that RL Zoo command lines parse, but any
# non-default value exits 2 with "not supported yet", never ignored.
NOT_YET = {
    "truncate_last_trajectory": (True, "--truncate-last-trajectory (HER replay buffers; rlbench has no HER)"),
}

RUN_FLAGS = (
    shared("algo"),
    shared("env"),
    shared("n_timesteps"),
    shared("seed"),
    flag(
        "--n-seeds",
        type=int,
        default=None,
        metavar="K",
        help="train K seeds (--seed, --seed+1, ...) in one process as one vmapped learner, each in its own "
        "run folder (default 1; with -i, the checkpoint's whole group: --n-seeds 1 resumes that seed alone)",
    ),
    shared("log_folder"),
    shared("eval_freq"),
    shared("eval_episodes"),
    flag("--n-eval-envs", type=int, default=1, help="number of evaluation envs"),
    flag(
        "--vec-env",
        default="dummy",
        choices=VEC_ENV_KINDS,
        help="in-process, subprocess or EnvPool envs (envpool-xla: EnvPool stepped inside the compiled training "
        "program, the device loop)",
    ),
    shared("hyperparams"),
    shared("env_kwargs"),
    flag(
        "--eval-env-kwargs",
        nargs="+",
        default=None,
        metavar="KEY:VALUE",
        help="kwargs of the evaluation env (default: the training env's)",
    ),
    shared("conf_file"),
    shared("gym_packages"),
    shared("trust_wrappers"),
    flag(
        "--log-interval",
        type=int,
        default=-1,
        help="episodes between training-metric logs (-1: default 4; < -1: never)",
    ),
    shared("verbose"),
    shared("progress"),
    flag("-uuid", "--uuid", boolean=True, help="append a unique id to the run folder name"),
    shared("device"),
    shared("num_threads"),
    shared("compile_cache"),
)
CHECKPOINT_FLAGS = (
    flag(
        "-i",
        "--trained-agent",
        default="",
        help="continue training from a checkpoint (.zip): counters, schedules, PRNG keys, optimizer "
        "state, envs and, if saved, the replay buffer continue; -n adds steps to it",
    ),
    flag("--save-freq", type=int, default=-1, help="write rl_model_<steps>_steps.zip every n env steps (< 0: never)"),
    flag("--keep-checkpoints", type=int, default=0, help="keep only the newest K rl_model_* checkpoints (0: keep all)"),
    flag("--save-replay-buffer", boolean=True, help="put the replay buffer in the periodic and final checkpoints"),
    flag(
        "--allow-space-bounds-mismatch",
        boolean=True,
        help="with -i: accept an env whose space bounds (not shapes) differ from the checkpoint's",
    ),
    # Later features: accepted, refused with a clear message until implemented.
    flag("--truncate-last-trajectory", type=str2bool, default=True, help="(HER only; no effect here)"),
)
LOGGING_FLAGS = (
    flag(
        "-tb", "--tensorboard-log", default="", help="also write TensorBoard event files under DIR/<env_id>/<algo>_<N>"
    ),
    shared("track"),
    shared("wandb_project_name"),
    shared("wandb_entity"),
    flag("--wandb-group", default=None, help="W&B group, e.g. to gather seeds"),
    shared("wandb_tags"),
)
TUNING_FLAGS = (
    flag("-optimize", "--optimize-hyperparameters", boolean=True, help="tune hyperparameters with Optuna"),
    flag("--n-trials", type=int, default=500, help="trials this invocation runs (over all --n-jobs)"),
    flag(
        "--max-total-trials",
        type=int,
        default=None,
        help="stop every worker once the study has this many COMPLETE/PRUNED/FAIL trials",
    ),
    flag(
        "--heartbeat-grace",
        type=int,
        default=GRACE_S,
        metavar="SECONDS",
        help=f"a RUNNING trial silent this long belongs to a dead worker: FAIL, retried once (default {GRACE_S}; "
        f"at least {2 * HEARTBEAT_S}, twice the heartbeat interval)",
    ),
    flag("--no-optim-plots", boolean=True, help="skip the optimization-history and importance plots"),
    flag("--n-jobs", type=int, default=1, help="parallel worker processes"),
    flag(
        "--sampler",
        default="tpe",
        choices=("random", "tpe", "cmaes", "auto"),
        help="auto: OptunaHub's AutoSampler (fetched from GitHub at first use, then cached)",
    ),
    flag("--pruner", default="median", choices=("halving", "median", "hyperband", "none")),
    flag("--n-startup-trials", type=int, default=10, help="random trials before the sampler/pruner act"),
    flag(
        "--n-evaluations",
        type=int,
        default=None,
        help="evaluations per trial (reported to the pruner); default one per 100k steps",
    ),
    flag(
        "--storage",
        default=None,
        help="journal file path (default logs/<algo>/optuna_<env>.log), sqlite:///f.db or "
        "postgresql://user:password@host/db",
    ),
    flag("--study-name", default=None, help="default <algo>_<env>"),
    flag("--trial-id", type=int, default=None, help="train with the hyperparameters of trial N"),
    flag(
        "--optimization-log-path",
        default=None,
        help="write each trial's evaluations.npz and model under PATH/trial_<n>",
    ),
)


def build_parser() -> argparse.ArgumentParser:
    """RL Zoo's train.py flags (REFERENCE.md A.1): same names, short forms and defaults."""
    table = (*RUN_FLAGS, *CHECKPOINT_FLAGS, *LOGGING_FLAGS, *TUNING_FLAGS)
    return parser_from(table, prog="train.py", description=__doc__.splitlines()[0])


def check_flags(args: argparse.Namespace) -> None:
    for dest, (default, name) in NOT_YET.items():
        if getattr(args, dest) != default:
            raise ConfigError(f"{name} is not supported yet by rlbench")
    if args.track:
        import_wandb()  # exit 2 with the install hint before anything is written
    if args.tensorboard_log:
        import_tensorboardx()  # likewise


def request_from_args(args: argparse.Namespace) -> RunRequest:
    """The run the flags ask for, as data for rlbench.run.experiment.resolve."""
    return RunRequest(
        algo=args.algo,
        env=args.env,
        conf_file=args.conf_file,
        params=tuple(args.hyperparams),
        env_kwargs=tuple(args.env_kwargs),
        eval_env_kwargs=None if args.eval_env_kwargs is None else tuple(args.eval_env_kwargs),
        n_timesteps=args.n_timesteps,
        seed=args.seed,
        n_seeds=args.n_seeds,
        trained_agent=args.trained_agent,
        allow_space_bounds_mismatch=args.allow_space_bounds_mismatch,
        log_folder=args.log_folder,
        keep_checkpoints=args.keep_checkpoints,
        device=args.device,
        num_threads=args.num_threads,
        gym_packages=tuple(args.gym_packages),
        trust_wrappers=tuple(args.trust_wrappers),
        vec_env=args.vec_env,
        eval_freq=args.eval_freq,
        eval_episodes=args.eval_episodes,
        n_eval_envs=args.n_eval_envs,
        log_interval=args.log_interval,
        verbose=args.verbose,
        progress=args.progress,
        trial_id=args.trial_id,
        storage=args.storage,
        study_name=args.study_name,
    )


def command_line(argv: Sequence[str]) -> str:
    """The command as the user typed it (for command.txt and W&B), with credentials masked."""
    return shlex.join(["python", "train.py", *redact_argv(argv)])


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = build_parser().parse_args(argv)
    if args.optimize_hyperparameters:
        return run_optimization(args, argv)
    # From the first moment: a signal before training starts removes what the start created (run folders).
    with GracefulStop("writing a checkpoint, then stopping (Ctrl-C again aborts without one)", starting=True) as stop:
        try:
            return train_from_args(args, argv, stop)
        except STOPPING_ERRORS as error:  # a bad flag or file (2), a corrupt -i (1), a signal while starting
            return exit_code(error)


def load_trial_lazily(request: RunRequest, env_name: str) -> tuple[dict[str, Any], int | None]:
    """--trial-id's stored trial: Optuna is imported only when a trial is asked for."""
    from rlbench.tuning.study import load_trial

    return load_trial(request, env_name)


def train_from_args(args: argparse.Namespace, argv: Sequence[str], stop: GracefulStop) -> int:
    cache = compile_cache.enable(args.compile_cache)  # before anything compiles
    check_flags(args)
    exp = resolve(request_from_args(args), load_trial=load_trial_lazily)
    if args.verbose:  # after the checks: a bad-input error is the first line printed
        print(compile_cache.describe(cache))
        print(learner_summary(exp.algo, exp.learner_config, exp.env_spec))  # its cost, before it trains
    launched = launch(exp, outputs_from_args(args, argv), Hooks(started=stop.started, stop_requested=stop))
    return run_exit_code(report(exp, launched, args.verbose))


def outputs_from_args(args: argparse.Namespace, argv: Sequence[str]) -> RunOutputs:
    """What the run writes, from the flags; args.yml records every flag, command.txt the command line."""
    tracking = None
    if args.track:
        tracking = Tracking(args.wandb_project_name, args.wandb_entity, args.wandb_group, tuple(args.wandb_tags))
    return RunOutputs(
        log_folder=args.log_folder,
        uuid=args.uuid,
        save_freq=args.save_freq,
        keep_checkpoints=args.keep_checkpoints,
        save_replay_buffer=args.save_replay_buffer,
        tensorboard_log=args.tensorboard_log,
        tracking=tracking,
        verbose=args.verbose,
        saved_args=vars(args),
        command=command_line(argv),
        continuation=tuple(["python", "train.py", *redact_argv(continuation_flags(args))]),
        final_evaluation=True,
    )


# What a continuation must not repeat: -i names the new checkpoint; on resume -n counts steps to add (the
# checkpoint keeps the run's target) and --seed is the checkpoint's (another is ignored, with a note). The
# tuning flags are left out too: -optimize resumes nothing, and a --trial-id's values are in the checkpoint.
NOT_CONTINUED = ("algo", "env", "trained_agent", "n_timesteps", "seed")


def continuation_flags(args: argparse.Namespace) -> list[str]:
    """The flags that shaped this run, spelled for the command that continues it (-i added by the caller):
    every flag of the run, its checkpoints and its logging whose value is not the default, read from the
    parsed flags, so an abbreviated or `--flag=value` spelling comes back whole."""
    defaults = vars(build_parser().parse_args([]))
    flags = ["--algo", args.algo, "--env", args.env]
    for item in (*RUN_FLAGS, *CHECKPOINT_FLAGS, *LOGGING_FLAGS):
        dest = item.names[-1].lstrip("-").replace("-", "_")
        value = getattr(args, dest)
        if dest in NOT_CONTINUED or value == defaults[dest]:
            continue
        if value is True:  # a boolean flag given (the others are at their default, False)
            flags.append(item.names[0])
        else:
            flags += [item.names[0], *map(str, value if isinstance(value, list) else [value])]
    return flags


def run_optimization(args: argparse.Namespace, argv: Sequence[str]) -> int:
    """-optimize: exit 2 for bad input, 1 when the storage server cannot be reached (rlbench.tuning.tune)."""
    try:
        return optimize_from_args(args, argv)
    except STOPPING_ERRORS as error:
        return exit_code(error)


def optimize_from_args(args: argparse.Namespace, argv: Sequence[str]) -> int:
    cache = compile_cache.enable(args.compile_cache)  # before anything compiles
    try:  # Optuna is imported only here, keeping plain runs light
        from rlbench.tuning.tune import TuningOptions, optimize
    except ImportError as error:
        raise ConfigError(f"-optimize needs Optuna, a dependency of rlbench ({error}): pip install -e .") from None
    if args.track or args.tensorboard_log or args.trained_agent or args.save_freq > 0:
        raise ConfigError(
            "-optimize runs trials without --track, -tb, -i or --save-freq (use --optimization-log-path for "
            "per-trial files)"
        )
    options = TuningOptions(
        n_trials=args.n_trials,
        n_jobs=args.n_jobs,
        max_total_trials=args.max_total_trials,
        heartbeat_grace=args.heartbeat_grace,
        sampler=args.sampler,
        pruner=args.pruner,
        n_startup_trials=args.n_startup_trials,
        n_evaluations=args.n_evaluations,
        optimization_log_path=args.optimization_log_path,
        optim_plots=not args.no_optim_plots,
        banner=compile_cache.describe(cache) if args.verbose else "",
    )
    check_flags(args)
    return optimize(request_from_args(args), options, argv)
