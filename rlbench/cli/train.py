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

from rlbench.algos.registry import ALGORITHMS
from rlbench.config import hyperparams
from rlbench.envs.make import VEC_ENV_KINDS
from rlbench.errors import ConfigError
from rlbench.loggers.tensorboard import import_tensorboardx
from rlbench.loggers.tracking import import_wandb
from rlbench.redact import redact_argv
from rlbench.run import compile_cache
from rlbench.run.experiment import RunRequest, device_flag, resolve
from rlbench.run.launch import (
    EXIT_INTERRUPTED,
    RunOutputs,
    Tracking,
    prepare_run_dirs,
    print_banner,
    run_exit_code,
    train_run,
)
from rlbench.run.signals import GracefulStop, StartInterrupted
from rlbench.store.checkpoint import CheckpointError
from rlbench.tuning import GRACE_S, HEARTBEAT_S

__all__ = ["EXIT_INTERRUPTED", "build_parser", "main", "request_from_args"]


def str2bool(text: str) -> bool:
    """Real booleans for flags that take a value (RL Zoo's `type=bool` made "False" true)."""
    lowered = text.lower()
    if lowered in ("1", "true", "yes", "y", "on"):
        return True
    if lowered in ("0", "false", "no", "n", "off"):
        return False
    raise argparse.ArgumentTypeError(f"expected a boolean (true/false), got {text!r}")


def add_bool_flag(p: argparse.ArgumentParser, *names: str, help: str) -> None:
    """`--flag`, `--flag true|false` and `--no-flag` all work; the default is False. A flag named in the
    negative (`--no-optim-plots`) gets the positive as its opposite (`--optim-plots`), not `--no-no-...`."""
    name = names[-1].lstrip("-")
    dest = name.replace("-", "_")
    p.add_argument(*names, dest=dest, nargs="?", const=True, default=False, type=str2bool, help=help)
    opposite = name.removeprefix("no-") if name.startswith("no-") else "no-" + name
    p.add_argument("--" + opposite, dest=dest, action="store_false", help=argparse.SUPPRESS)


# RL Zoo flags whose features later work brings (tracking, tuning). Accepted so that RL Zoo command
# lines parse, but any non-default value exits 2 with "not supported yet", never ignored.
NOT_YET = {
    "truncate_last_trajectory": (True, "--truncate-last-trajectory (HER replay buffers; rlbench has no HER)"),
}


def build_parser() -> argparse.ArgumentParser:
    """RL Zoo's train.py flags (REFERENCE.md A.1): same names, short forms and defaults."""
    p = argparse.ArgumentParser(prog="train.py", description=__doc__.splitlines()[0])
    p.add_argument("--algo", default="sac", help=f"algorithm: {', '.join(ALGORITHMS)}")
    p.add_argument("--env", default="Pendulum-v1", help="gymnasium environment id (or module:EnvId)")
    p.add_argument("-n", "--n-timesteps", type=int, default=-1, help="env steps (overrides the file)")
    p.add_argument("--seed", type=int, default=-1, help="random seed; < 0 draws one (printed and saved)")
    p.add_argument(
        "--n-seeds",
        type=int,
        default=None,
        metavar="K",
        help="train K seeds (--seed, --seed+1, ...) in one process as one vmapped learner, each in its own "
        "run folder (default 1; with -i, the checkpoint's whole group: --n-seeds 1 resumes that seed alone)",
    )
    p.add_argument("-f", "--log-folder", default="logs", help="log root folder")
    p.add_argument("--eval-freq", type=int, default=25_000, help="evaluate every n env steps (< 0: never)")
    p.add_argument("--eval-episodes", type=int, default=5, help="episodes per evaluation")
    p.add_argument("--n-eval-envs", type=int, default=1, help="number of evaluation envs")
    p.add_argument("--vec-env", default="dummy", choices=VEC_ENV_KINDS, help="in-process or subprocess envs")
    p.add_argument(
        "-params",
        "--hyperparams",
        nargs="+",
        default=[],
        metavar="KEY:VALUE",
        help="override hyperparameters, e.g. learning_rate:1e-3 policy_kwargs:dict(net_arch=[64,64])",
    )
    p.add_argument("--env-kwargs", nargs="+", default=[], metavar="KEY:VALUE", help="env constructor kwargs")
    p.add_argument(
        "--eval-env-kwargs",
        nargs="+",
        default=None,
        metavar="KEY:VALUE",
        help="kwargs of the evaluation env (default: the training env's)",
    )
    p.add_argument(
        "-conf",
        "--conf-file",
        default=None,
        help="hyperparameter file (.yml/.yaml, .py or module); default hyperparams/<algo>.yml",
    )
    p.add_argument(
        "--gym-packages",
        nargs="+",
        default=[],
        metavar="MODULE",
        help="modules to import before making the env (they register custom envs; their wrappers "
        "are trusted in env_wrapper)",
    )
    p.add_argument(
        "--trust-wrappers",
        nargs="+",
        default=[],
        metavar="MODULE",
        help="modules whose gymnasium.Wrapper classes env_wrapper may name, besides gymnasium's and "
        "rlbench's (a file read back, such as a checkpoint's manifest, can name no others)",
    )
    p.add_argument(
        "--log-interval",
        type=int,
        default=-1,
        help="episodes between training-metric logs (-1: default 4; < -1: never)",
    )
    p.add_argument("--verbose", type=int, default=1, choices=(0, 1, 2), help="0 quiet, 1 info")
    p.add_argument("-P", "--progress", action="store_true", help="show a progress bar with fps and last eval")
    add_bool_flag(p, "-uuid", "--uuid", help="append a unique id to the run folder name")
    p.add_argument(
        "--device",
        default="auto",
        type=device_flag,
        help="JAX backend: auto (GPU if present), cpu, gpu, or gpu:N (cuda:N) for the N-th GPU",
    )
    p.add_argument(
        "--num-threads", type=int, default=-1, help="-1: XLA's default (all cores); 1: single-threaded XLA on CPU"
    )
    p.add_argument(
        "--compile-cache",
        default=None,
        metavar="DIR|none",
        help=f"persistent compilation cache folder (default: ${compile_cache.ENV_VAR}, else "
        "~/.cache/rlbench/jax); none turns it off",
    )
    p.add_argument(
        "-i",
        "--trained-agent",
        default="",
        help="continue training from a checkpoint (.zip): counters, schedules, PRNG keys, optimizer "
        "state, envs and, if saved, the replay buffer continue; -n adds steps to it",
    )
    p.add_argument(
        "--save-freq", type=int, default=-1, help="write rl_model_<steps>_steps.zip every n env steps (< 0: never)"
    )
    p.add_argument(
        "--keep-checkpoints", type=int, default=0, help="keep only the newest K rl_model_* checkpoints (0: keep all)"
    )
    add_bool_flag(p, "--save-replay-buffer", help="put the replay buffer in the periodic and final checkpoints")
    add_bool_flag(
        p,
        "--allow-space-bounds-mismatch",
        help="with -i: accept an env whose space bounds (not shapes) differ from the checkpoint's",
    )
    # Later features: accepted, refused with a clear message until implemented.
    p.add_argument("--truncate-last-trajectory", type=str2bool, default=True, help="(HER only; no effect here)")
    p.add_argument(
        "-tb", "--tensorboard-log", default="", help="also write TensorBoard event files under DIR/<env_id>/<algo>_<N>"
    )
    add_bool_flag(p, "--track", help="track the run on Weights & Biases (offline when W&B is unreachable)")
    p.add_argument("--wandb-project-name", default="sb3", help="W&B project")
    p.add_argument("--wandb-entity", default=None, help="W&B entity (team or user)")
    p.add_argument("--wandb-group", default=None, help="W&B group, e.g. to gather seeds")
    p.add_argument("-tags", "--wandb-tags", nargs="+", default=[], help="W&B tags")
    add_bool_flag(p, "-optimize", "--optimize-hyperparameters", help="tune hyperparameters with Optuna")
    p.add_argument("--n-trials", type=int, default=500, help="trials this invocation runs (over all --n-jobs)")
    p.add_argument(
        "--max-total-trials",
        type=int,
        default=None,
        help="stop every worker once the study has this many COMPLETE/PRUNED/FAIL trials",
    )
    p.add_argument(
        "--heartbeat-grace",
        type=int,
        default=GRACE_S,
        metavar="SECONDS",
        help=f"a RUNNING trial silent this long belongs to a dead worker: FAIL, retried once (default {GRACE_S}; "
        f"at least {2 * HEARTBEAT_S}, twice the heartbeat interval)",
    )
    add_bool_flag(p, "--no-optim-plots", help="skip the optimization-history and importance plots")
    p.add_argument("--n-jobs", type=int, default=1, help="parallel worker processes")
    p.add_argument(
        "--sampler",
        default="tpe",
        choices=("random", "tpe", "cmaes", "auto"),
        help="auto: OptunaHub's AutoSampler (fetched from GitHub at first use, then cached)",
    )
    p.add_argument("--pruner", default="median", choices=("halving", "median", "hyperband", "none"))
    p.add_argument("--n-startup-trials", type=int, default=10, help="random trials before the sampler/pruner act")
    p.add_argument(
        "--n-evaluations",
        type=int,
        default=None,
        help="evaluations per trial (reported to the pruner); default one per 100k steps",
    )
    p.add_argument(
        "--storage",
        default=None,
        help="journal file path (default logs/<algo>/optuna_<env>.log), sqlite:///f.db or "
        "postgresql://user:password@host/db",
    )
    p.add_argument("--study-name", default=None, help="default <algo>_<env>")
    p.add_argument("--trial-id", type=int, default=None, help="train with the hyperparameters of trial N")
    p.add_argument(
        "--optimization-log-path",
        default=None,
        help="write each trial's evaluations.npz and model under PATH/trial_<n>",
    )
    return p


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
        except StartInterrupted as interrupted:
            print(f"stopped by {interrupted} before training started; no run folder left behind", file=sys.stderr)
            return 128 + interrupted.signum


def load_trial_lazily(request: RunRequest, env_name: str) -> tuple[dict[str, Any], int | None]:
    """--trial-id's stored trial: Optuna is imported only when a trial is asked for."""
    from rlbench.tuning.study import load_trial

    return load_trial(request, env_name)


def train_from_args(args: argparse.Namespace, argv: Sequence[str], stop: GracefulStop) -> int:
    try:
        cache = compile_cache.enable(args.compile_cache)  # before anything compiles
        check_flags(args)
        exp = resolve(request_from_args(args), load_trial=load_trial_lazily)
    except ConfigError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    except CheckpointError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    if args.verbose:  # after the checks: a bad-input error is the first line printed
        print(compile_cache.describe(cache))
    outputs = outputs_from_args(args, argv)
    try:
        run_dirs = prepare_run_dirs(exp, outputs, started=stop.started)
    except OSError as error:
        print(f"error: {error.strerror or error}", file=sys.stderr)
        return 1
    if args.verbose:
        print_banner(exp, run_dirs, args.conf_file or hyperparams.default_file(exp.algo.name))
    return run_exit_code(train_run(exp, outputs, run_dirs, stop))


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
    )


def run_optimization(args: argparse.Namespace, argv: Sequence[str]) -> int:
    """-optimize: Optuna is imported only here (keeping plain runs light). Exit 1 when
    the storage server cannot be reached."""
    try:
        cache = compile_cache.enable(args.compile_cache)  # before anything compiles
    except ConfigError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    try:
        from rlbench.tuning.study import StorageUnavailable
        from rlbench.tuning.tune import TuningOptions, optimize
    except ImportError as error:
        print(f"error: -optimize needs Optuna, a dependency of rlbench ({error}): pip install -e .", file=sys.stderr)
        return 2
    if args.track or args.tensorboard_log or args.trained_agent or args.save_freq > 0:
        print(
            "error: -optimize runs trials without --track, -tb, -i or --save-freq (use "
            "--optimization-log-path for per-trial files)",
            file=sys.stderr,
        )
        return 2
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
    try:
        check_flags(args)
        return optimize(request_from_args(args), options, argv)
    except ConfigError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    except StorageUnavailable as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
