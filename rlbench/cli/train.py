"""`python train.py`: RL Zoo's training command line on rlbench's learners.

Exit codes: 0 success; 1 runtime failure (a failed env worker, a corrupt checkpoint given to `-i`);
2 usage or configuration error (raised before any file is written or env stepped); 75 stopped by
SIGINT or SIGTERM after writing a checkpoint to resume from (EX_TEMPFAIL: try again).
"""

from __future__ import annotations

import argparse
import shlex
import shutil
import signal
import subprocess
import sys
import time
import traceback
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import jax
import numpy as np
import yaml

from rlbench import compile_cache, hyperparams
from rlbench.checkpoint import CheckpointError, library_versions
from rlbench.checkpointing import CheckpointSettings
from rlbench.envs.make import VEC_ENV_KINDS
from rlbench.errors import ConfigError, RunFailure
from rlbench.experiment import Experiment, RunRequest, resolve
from rlbench.files import atomic_write_text
from rlbench.loggers.base import MultiLogger
from rlbench.loggers.console import ConsoleLogger
from rlbench.loggers.csv import CSVLogger
from rlbench.loggers.tensorboard import TensorBoardLogger, import_tensorboardx
from rlbench.loggers.tracking import WandbTracker, import_wandb
from rlbench.redact import redact_argv, redact_values
from rlbench.registry import ALGORITHMS
from rlbench.runner import SeedOutput, train_seeds
from rlbench.signals import SignalScope
from rlbench.tuning import GRACE_S, HEARTBEAT_S


def str2bool(text: str) -> bool:
    """Real booleans for flags that take a value (RL Zoo's `type=bool` made "False" true)."""
    lowered = text.lower()
    if lowered in ("1", "true", "yes", "y", "on"):
        return True
    if lowered in ("0", "false", "no", "n", "off"):
        return False
    raise argparse.ArgumentTypeError(f"expected a boolean (true/false), got {text!r}")


def add_bool_flag(p: argparse.ArgumentParser, *names: str, help: str) -> None:
    """`--flag`, `--flag true|false` and `--no-flag` all work; the default is False."""
    dest = names[-1].lstrip("-").replace("-", "_")
    p.add_argument(*names, dest=dest, nargs="?", const=True, default=False, type=str2bool, help=help)
    p.add_argument("--no-" + names[-1].lstrip("-"), dest=dest, action="store_false", help=argparse.SUPPRESS)


EXIT_INTERRUPTED = 75  # EX_TEMPFAIL: stopped by a signal, checkpoint written, resumable
MAX_SEED = 2**32 - 1  # as SB3 and RL Zoo: numpy's legacy seeding and JAX keys take any seed up to here

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
        choices=("auto", "cpu", "gpu", "cuda"),
        help="JAX backend: auto (GPU if present), cpu, or gpu",
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
    """The run the flags ask for, as data for rlbench.experiment.resolve."""
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


def latest_run_id(algo_dir: Path, env_id: str) -> int:
    ids = []
    for path in algo_dir.glob(f"{env_id}_*"):
        suffix = path.name[len(env_id) + 1 :].split("_", 1)[0]  # N, or N from N_<uuid>
        if suffix.isdigit():
            ids.append(int(suffix))
    return max(ids, default=0)


def create_run_dir(log_folder: str, algo: str, env_id: str, use_uuid: bool) -> Path:
    """Create `<log_folder>/<algo>/<env_id>_<N>[_<uuid>]`, N one more than the highest existing (RL Zoo
    layout). The folder is claimed with an exclusive mkdir, so two runs started at once never share one."""
    algo_dir = Path(log_folder) / algo
    algo_dir.mkdir(parents=True, exist_ok=True)
    for _ in range(1000):
        name = f"{env_id}_{latest_run_id(algo_dir, env_id) + 1}" + (f"_{uuid.uuid4()}" if use_uuid else "")
        try:
            (algo_dir / name).mkdir()
            return algo_dir / name
        except FileExistsError:
            continue  # another run claimed this id between the scan and the mkdir
    raise RuntimeError(f"could not claim a run folder in {algo_dir}")


def claim_run_dirs(log_folder: str, algo: str, env_id: str, use_uuid: bool, n_seeds: int) -> list[Path]:
    """One run folder per seed, each claimed atomically (`create_run_dir`); none left behind on failure."""
    run_dirs: list[Path] = []
    try:
        for _ in range(n_seeds):
            run_dirs.append(create_run_dir(log_folder, algo, env_id, use_uuid))
    except OSError:
        for run_dir in run_dirs:
            shutil.rmtree(run_dir, ignore_errors=True)
        raise
    return run_dirs


def write_run_files(run_dir: Path, exp: Experiment, seed: int, args: argparse.Namespace, argv: Sequence[str]) -> None:
    """config.yml, args.yml and command.txt in `<run_dir>/<env_id>/`, as RL Zoo lays them out (args.yml with
    this folder's seed, and the group id in a run of several seeds); written atomically, with credentials
    (a --storage password) masked."""
    params_dir = run_dir / exp.run.env_id.replace(":", "_")
    params_dir.mkdir()
    group = {"group": exp.group_id} if exp.n_seeds > 1 else {}
    saved_args = redact_values(dict(sorted({**vars(args), "seed": seed, **group}.items())))
    files = {
        "config.yml": yaml.safe_dump(_plain(exp.hyperparams), sort_keys=True),
        "args.yml": yaml.safe_dump(_plain(saved_args), sort_keys=True),
        "command.txt": command_line(argv) + "\n",
    }
    for name, text in files.items():
        path = params_dir / name
        try:
            atomic_write_text(path, text)
        except OSError as error:
            raise OSError(error.errno, f"could not write {path}: {error.strerror or error}") from None


def command_line(argv: Sequence[str]) -> str:
    """The command as the user typed it (for command.txt and W&B), with credentials masked."""
    return shlex.join(["python", "train.py", *redact_argv(argv)])


def _plain(value: Any) -> Any:
    """Plain YAML types only (no Python tags): tuples become lists."""
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


class StopRequest(SignalScope):
    """SIGINT and SIGTERM ask the loop to stop at the next env step, after writing a checkpoint.
    A second SIGINT aborts at once (KeyboardInterrupt) for a user who does not want to wait."""

    def __init__(self) -> None:
        self.reason: str | None = None

    def _handle(self, signum: int, frame: Any) -> None:
        if self.reason is not None and signum == signal.SIGINT:
            raise KeyboardInterrupt
        self.reason = signal.Signals(signum).name
        print(
            f"\n{self.reason} received: writing a checkpoint, then stopping (Ctrl-C again aborts without one)",
            file=sys.stderr,
            flush=True,
        )

    def __call__(self) -> str | None:
        return self.reason


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = build_parser().parse_args(argv)
    try:
        cache = compile_cache.enable(args.compile_cache)  # before anything compiles
    except ConfigError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    if args.verbose:
        print(compile_cache.describe(cache))
    if args.optimize_hyperparameters:
        return run_optimization(args, argv)
    try:
        check_flags(args)
        exp = resolve(request_from_args(args))
    except ConfigError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    except CheckpointError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    model_name = exp.run.env_id.replace(":", "_")
    try:
        run_dirs = claim_run_dirs(args.log_folder, exp.algo.name, model_name, args.uuid, exp.n_seeds)
    except OSError as error:
        print(f"error: cannot create a run folder under {args.log_folder}: {error.strerror or error}", file=sys.stderr)
        return 1
    try:
        for seed, run_dir in zip(exp.seeds, run_dirs, strict=True):
            write_run_files(run_dir, exp, seed, args, argv)
    except OSError as error:  # a full disk at start: no half-written file, no empty run folder left behind
        for run_dir in run_dirs:
            shutil.rmtree(run_dir, ignore_errors=True)
        print(f"error: {error}", file=sys.stderr)
        return 1
    if args.verbose:
        if exp.n_seeds == 1:
            print(f"Seed: {exp.run.seed}\nLog folder: {run_dirs[0]}")
        else:
            print(f"Seeds: {exp.seeds[0]} to {exp.seeds[-1]}, trained together (group {exp.group_id})")
            print("Log folders: " + ", ".join(str(run_dir) for run_dir in run_dirs))
        if exp.resume is not None:
            counters = exp.resume.manifest["counters"]
            print(
                f"Resuming from {exp.resume.path}{' and its group' if exp.n_seeds > 1 else ''} at "
                f"{counters['env_steps']} env steps ({counters['gradient_steps']} gradient steps), until "
                f"{exp.run.n_timesteps}"
            )
            print("Hyperparameters (merged: checkpoint < -params < -n):")
        else:
            source = args.conf_file or hyperparams.default_file(exp.algo.name)
            print(
                f"Hyperparameters (merged: {exp.algo.name} defaults < {exp.algo.name} preset < {source} "
                f"< -params < -n):"
            )
        print(yaml.safe_dump(_plain(exp.hyperparams), sort_keys=True), end="")

    trackers: list[WandbTracker] = []
    codes = [1] * exp.n_seeds
    try:
        if args.track:
            for index, run_dir in enumerate(run_dirs):
                trackers.append(start_tracking(args, exp, index, run_dir, argv))
        codes = train_and_report(args, exp, run_dirs, model_name, trackers)
        return max(codes, key=exit_code_priority)
    finally:
        for tracker, code in zip(trackers, codes, strict=False):
            tracker.finish(code)


def exit_code_priority(code: int) -> int:
    """The process's exit code from its seeds': a failure (1, 2) over an interruption (75) over success (0)."""
    return {0: 0, EXIT_INTERRUPTED: 1}.get(code, 2)


def run_optimization(args: argparse.Namespace, argv: Sequence[str]) -> int:
    """-optimize: Optuna is imported only here (keeping plain runs light). Exit 1 when
    the storage server cannot be reached."""
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


def start_tracking(
    args: argparse.Namespace, exp: Experiment, index: int, run_dir: Path, argv: Sequence[str]
) -> WandbTracker:
    """Seed `index`'s W&B run: RL Zoo's name and flags; config = hyperparameters, arguments, seed, command
    line, versions, git commit and backend. The seeds of one process are grouped (--wandb-group, by default
    the group id). A resumed run continues the checkpoint's W&B run id."""
    seed = exp.seeds[index]
    name = f"{exp.run.env_id}__{exp.algo.name}__{seed}__{int(time.time())}"
    group = {"group_id": exp.group_id} if exp.n_seeds > 1 else {}
    config = {
        **_plain(exp.hyperparams),
        "algo": exp.algo.name,
        "env_id": exp.run.env_id,
        "seed": seed,
        **group,
        "args": _plain(redact_values({**vars(args), "seed": seed})),
        "command": command_line(argv),
        "versions": library_versions(),
        "git_commit": git_commit(),
        "backend": jax.default_backend(),
        "run_dir": str(run_dir),
    }
    run_id = exp.resume_seeds[index].manifest.get("wandb_run_id") if exp.resume_seeds else None
    return WandbTracker(
        project=args.wandb_project_name,
        entity=args.wandb_entity,
        group=args.wandb_group or exp.group_id,
        tags=list(args.wandb_tags),
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


def train_and_report(
    args: argparse.Namespace,
    exp: Experiment,
    run_dirs: Sequence[Path],
    model_name: str,
    trackers: Sequence[WandbTracker],
) -> list[int]:
    """Train every seed; return each seed's exit code (1 for a seed that diverged)."""
    n_seeds = exp.n_seeds
    outputs = [
        seed_output(args, exp, index, run_dirs, model_name, trackers[index] if trackers else None)
        for index in range(n_seeds)
    ]
    try:
        with StopRequest() as stop:
            result = train_seeds(
                exp.run,
                exp.algo,
                exp.learner_config,
                outputs,
                resume=exp.resume_seeds or None,
                stop_requested=stop,
            )
    except ConfigError as error:
        print(f"error: {error}", file=sys.stderr)
        return [2] * n_seeds
    except RunFailure as error:  # an env, an evaluation or a divergence; the notes name the checkpoints
        print(f"error: {error}", *getattr(error, "__notes__", []), sep="\n", file=sys.stderr)
        return [1] * n_seeds
    except OSError as error:
        print(f"error: {error}", file=sys.stderr)
        return [1] * n_seeds
    except KeyboardInterrupt:
        print("aborted (second Ctrl-C): no checkpoint written for the current step", file=sys.stderr)
        return [130] * n_seeds
    except Exception:
        traceback.print_exc()
        return [1] * n_seeds
    for index, tracker in enumerate(trackers):
        evaluations = result.host.seeds[index].evaluations
        summary = {"env_steps": result.env_steps, "wall_time_s": result.wall_time}
        if evaluations.results:
            summary |= {
                "final_eval_mean_reward": float(np.mean(evaluations.results[-1])),
                "best_eval_mean_reward": float(max(np.mean(r) for r in evaluations.results)),
            }
        if index in result.failed:
            summary["failed"] = result.failed[index]
        files = [run_dirs[index] / "evaluations.npz", result.checkpoints[index]]
        tracker.summarize(summary, [path for path in files if path is not None], base=run_dirs[index])
    codes = [1 if index in result.failed else 0 for index in range(n_seeds)]
    if result.failed:
        print(f"{len(result.failed)} of {n_seeds} seeds diverged and were frozen:", file=sys.stderr)
        for index, reason in result.failed.items():
            print(f"  seed {exp.seeds[index]} ({run_dirs[index]}): {reason}", file=sys.stderr)
    if result.interrupted:
        written = [path for path in result.checkpoints if path is not None]
        print(
            f"Stopped by {result.interrupted} at {result.env_steps} env steps; "
            f"checkpoint{'s' if len(written) > 1 else ''}: {', '.join(map(str, written))}\n"
            f"Resume with: python train.py --algo {exp.algo.name} --env {exp.run.env_id} -i {written[0]}",
            file=sys.stderr,
        )
        return [code or EXIT_INTERRUPTED for code in codes]
    if args.verbose:
        seeds = f" per seed ({n_seeds} seeds)" if n_seeds > 1 else ""
        models = ", ".join(str(path) for path in result.checkpoints if path is not None)
        print(f"Trained {result.env_steps} env steps{seeds} in {result.wall_time:.1f} s; model: {models}")
    return codes


def seed_output(
    args: argparse.Namespace,
    exp: Experiment,
    index: int,
    run_dirs: Sequence[Path],
    model_name: str,
    tracker: WandbTracker | None,
) -> SeedOutput:
    """Seed `index`'s logger (progress.csv, the console for a one-seed run, TensorBoard, W&B), run folder
    and checkpoints, whose manifest names the group and every seed's folder in a run of several seeds."""
    run_dir = run_dirs[index]

    def make_logger(metric_names: Sequence[str]) -> MultiLogger:
        loggers: list[Any] = [CSVLogger(run_dir / "progress.csv", metric_names)]
        if args.verbose and exp.n_seeds == 1:  # several seeds: one console line per evaluation, for all
            loggers.append(ConsoleLogger())
        if args.tensorboard_log:
            loggers.append(
                TensorBoardLogger(
                    Path(args.tensorboard_log) / model_name / f"{exp.algo.name}_{run_dir.name[len(model_name) + 1 :]}"
                )
            )
        if tracker is not None:
            loggers.append(tracker)
        return MultiLogger(loggers)

    group = {}
    if exp.n_seeds > 1:
        group = {"group": {"id": exp.group_id, "index": index, "run_dirs": [path.name for path in run_dirs]}}
    checkpoints = CheckpointSettings(
        run_dir=run_dir,
        model_name=model_name,
        save_freq=args.save_freq,
        keep=args.keep_checkpoints,
        save_replay_buffer=args.save_replay_buffer,
        manifest={
            "algo": exp.algo.name,
            "env_id": exp.run.env_id,
            "seed": exp.seeds[index],
            "n_timesteps": exp.run.n_timesteps,
            "n_envs": exp.run.n_envs,
            "hyperparams": _plain(exp.hyperparams),
            "spaces": exp.spaces,
            "resumed_from": str(exp.resume_seeds[index].path) if exp.resume_seeds else None,
            "wandb_run_id": None if tracker is None else tracker.id,
            **group,
        },
    )
    return SeedOutput(make_logger, run_dir, checkpoints)
