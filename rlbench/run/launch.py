"""Launching a resolved run: from an `Experiment` to its finished run folders.

This is what train.py does once its flags are resolved, and what a sweep's cell does on a Ray worker
(rlbench.sweep): claim one RL Zoo run folder per seed (`<log>/<algo>/<env>_<N>`), write config.yml,
args.yml and command.txt into it, start the loggers (progress.csv, the console, TensorBoard, W&B), train
every seed, and turn the outcome into one exit code per seed. Nothing here reads a command line: the
caller says what to record as args.yml and command.txt (`RunOutputs`).
"""

from __future__ import annotations

import errno
import shlex
import shutil
import subprocess
import sys
import time
import traceback
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jax
import numpy as np
import yaml

from rlbench.config.literals import parse_key_values
from rlbench.envs.make import env_file_name
from rlbench.errors import ConfigError, RunFailure
from rlbench.files import atomic_write_text
from rlbench.loggers.base import MultiLogger
from rlbench.loggers.console import ConsoleLogger
from rlbench.loggers.csv import CSVLogger
from rlbench.loggers.tensorboard import TensorBoardLogger
from rlbench.loggers.tracking import WandbTracker
from rlbench.loop.runner import SeedOutput, TrainResult, train_seeds
from rlbench.loop.saving import CheckpointSettings
from rlbench.redact import redact_values
from rlbench.run.experiment import Experiment
from rlbench.run.signals import start_step
from rlbench.store.manifest import Group, RunDescription, Spaces, library_versions

EXIT_INTERRUPTED = 75  # EX_TEMPFAIL: stopped by a signal, checkpoint written, resumable
EXIT_ABORTED = 130  # a second Ctrl-C: stopped without a checkpoint


@dataclass(frozen=True)
class Tracking:
    """W&B settings (`--track`): RL Zoo's project, entity, group and tags."""

    project: str = "sb3"
    entity: str | None = None
    group: str | None = None  # None: the group id of a run of several seeds (else no group)
    tags: tuple[str, ...] = ()


@dataclass(frozen=True)
class RunOutputs:
    """Where and what a run writes besides its training itself, as train.py's flags spell it.

    `saved_args` is args.yml (train.py's parsed flags; each seed's folder gets its own seed) and `command`
    is command.txt (a command that reproduces the run); both are recorded, never read back as settings.
    """

    log_folder: str = "logs"
    uuid: bool = False
    save_freq: int = -1
    keep_checkpoints: int = 0
    save_replay_buffer: bool = False
    tensorboard_log: str = ""
    tracking: Tracking | None = None
    verbose: int = 1
    saved_args: Mapping[str, Any] = field(default_factory=dict)
    command: str = ""


def latest_run_id(algo_dir: Path, env_id: str) -> int:
    ids = []
    for path in algo_dir.glob(f"{env_id}_*"):
        suffix = path.name[len(env_id) + 1 :].split("_", 1)[0]  # N, or N from N_<uuid>
        if suffix.isdigit():
            ids.append(int(suffix))
    return max(ids, default=0)


def create_run_dir(log_folder: str | Path, algo: str, env_id: str, use_uuid: bool) -> Path:
    """Create `<log_folder>/<algo>/<env_id>_<N>[_<uuid>]`, N one more than the highest existing (RL Zoo
    layout). The folder is claimed with an exclusive mkdir, so two runs started at once never share one."""
    return claim_run_dirs(log_folder, algo, env_id, use_uuid, 1)[0]


def claim_run_dirs(
    log_folder: str | Path,
    algo: str,
    env_id: str,
    use_uuid: bool,
    n_seeds: int,
    fill: Callable[[list[Path]], None] | None = None,
) -> list[Path]:
    """`n_seeds` consecutive run folders after the highest existing one, each claimed with an exclusive
    mkdir, then `fill(run_dirs)` (their files). The algo folder is listed once, not once per folder (K claims
    cost K mkdirs, not K listings of a folder growing to K entries), and again only after a race with another
    run. If anything stops the start (an OSError, the exception of a signal), the folders claimed so far and
    the parents this call created are removed before it propagates."""
    algo_dir = Path(log_folder) / algo
    created_parents = [path for path in (algo_dir, *algo_dir.parents) if not path.exists()]
    run_dirs: list[Path] = []
    try:
        try:
            algo_dir.mkdir(parents=True, exist_ok=True)
            _claim_into(run_dirs, algo_dir, env_id, use_uuid, n_seeds)
        except OSError as error:
            raise OSError(
                error.errno, f"cannot create a run folder under {log_folder}: {error.strerror or error}"
            ) from None
        if fill is not None:
            fill(run_dirs)
    except BaseException:
        remove_run_dirs(run_dirs, created_parents)
        raise
    return run_dirs


def _claim_into(run_dirs: list[Path], algo_dir: Path, env_id: str, use_uuid: bool, n_seeds: int) -> None:
    next_id, races = latest_run_id(algo_dir, env_id) + 1, 0
    while len(run_dirs) < n_seeds:
        path = algo_dir / (f"{env_id}_{next_id}" + (f"_{uuid.uuid4()}" if use_uuid else ""))
        try:
            with start_step():  # a signal's exception waits until the folder is in the list, to be removed
                path.mkdir()
                run_dirs.append(path)
        except FileExistsError:  # another run claimed this id since the listing: list again
            races += 1
            if races > 1000:
                raise OSError(errno.EEXIST, f"could not claim a run folder in {algo_dir}") from None
            next_id = latest_run_id(algo_dir, env_id) + 1
            continue
        next_id += 1


def remove_run_dirs(run_dirs: Sequence[Path], created_parents: Sequence[Path] = ()) -> None:
    """Undo a start: the run folders, then the parents it created (innermost first) if nothing else is in them."""
    for run_dir in run_dirs:
        shutil.rmtree(run_dir, ignore_errors=True)
    for parent in created_parents:
        try:
            parent.rmdir()
        except OSError:
            break  # not empty (another run's folder) or already gone: its parents are not ours to remove


def model_name(exp: Experiment) -> str:
    """The env id as files and folders are named after it (`module:EnvId` -> `module_EnvId`, `ns/Id` -> `ns-Id`)."""
    return env_file_name(exp.run.env_id)


def prepare_run_dirs(exp: Experiment, outputs: RunOutputs, started: Callable[[], None] | None = None) -> list[Path]:
    """Claim the seeds' run folders and write their config.yml, args.yml and command.txt, then call `started`
    (GracefulStop.started: from then on a signal asks for a checkpoint). OSError, or a signal's
    StartInterrupted, after removing what was claimed: a full disk or a SIGTERM at start leaves no run folder."""

    def write_files(run_dirs: list[Path]) -> None:
        for seed, run_dir in zip(exp.seeds, run_dirs, strict=True):
            write_run_files(run_dir, exp, seed, outputs)
        if started is not None:
            with start_step():  # a signal before the switch still undoes the start, never lands between
                started()

    return claim_run_dirs(
        outputs.log_folder, exp.algo.name, model_name(exp), outputs.uuid, exp.n_seeds, fill=write_files
    )


def print_banner(exp: Experiment, run_dirs: Sequence[Path], conf_source: str) -> None:
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
        print(f"Hyperparameters (merged: {name} defaults < {name} preset < {conf_source} < -params < -n):")
    print(yaml.safe_dump(plain_yaml(exp.hyperparams), sort_keys=True), end="", flush=True)


def write_run_files(run_dir: Path, exp: Experiment, seed: int, outputs: RunOutputs) -> None:
    """config.yml, args.yml and command.txt in `<run_dir>/<env_id>/`, as RL Zoo lays them out (args.yml with
    this folder's seed, and the group id in a run of several seeds; command.txt retrains this seed alone);
    written atomically, with credentials (a --storage password) masked."""
    params_dir = run_dir / model_name(exp)
    params_dir.mkdir()
    group = {"group": exp.group_id} if exp.n_seeds > 1 else {}
    saved_args = redact_values(dict(sorted({**zoo_args(outputs.saved_args), "seed": seed, **group}.items())))
    command = outputs.command
    if exp.n_seeds > 1:
        index = exp.seeds.index(seed)
        command = seed_alone_command(command, seed, exp.resume_seeds[index].path if exp.resume_seeds else None)
    files = {
        "config.yml": yaml.safe_dump(plain_yaml(exp.hyperparams), sort_keys=True),
        "args.yml": yaml.safe_dump(plain_yaml(saved_args), sort_keys=True),
        "command.txt": command + "\n",
    }
    for name, text in files.items():
        path = params_dir / name
        try:
            atomic_write_text(path, text)
        except OSError as error:
            raise OSError(error.errno, f"could not write {path}: {error.strerror or error}") from None


# train.py's KEY:VALUE lists, which RL Zoo's StoreDict records in args.yml as a dict, or null when not given.
ZOO_DICT_ARGS = ("hyperparams", "env_kwargs", "eval_env_kwargs")


def zoo_args(saved_args: Mapping[str, Any]) -> dict[str, Any]:
    """args.yml's values as RL Zoo's: `-params a:1` as `{a: 1}`, none given as null (RL Zoo's enjoy.py reads
    `env_kwargs` back as a dict). The lists were parsed by resolve() already, so they parse."""
    args = dict(saved_args)
    for key in ZOO_DICT_ARGS:
        value = args.get(key)
        if isinstance(value, list | tuple):
            args[key] = parse_key_values(list(value), key) if value else None
    return args


def seed_alone_command(command: str, seed: int, checkpoint: Path | None = None) -> str:
    """command.txt for one seed of a run of several seeds: the command that trains that seed alone, as a
    single run (`--seed S --n-seeds 1`; in a resumed group, `-i <its checkpoint> --n-seeds 1`). The flags
    it replaces are dropped and the new ones appended: argparse keeps a flag's last value, so an
    abbreviated spelling left in place is overridden too."""
    if not command:
        return command
    if checkpoint is not None:
        replaced, values = ("-i", "--trained-agent"), ["-i", str(checkpoint)]
    else:
        replaced, values = ("--seed",), ["--seed", str(seed)]
    names = (*replaced, "--n-seeds")
    kept: list[str] = []
    tokens = iter(shlex.split(command))
    for token in tokens:
        if token in names:
            next(tokens, None)  # its value
        elif not token.startswith(tuple(f"{name}=" for name in names)):
            kept.append(token)
    return shlex.join([*kept, *values, "--n-seeds", "1"])


def plain_yaml(value: Any) -> Any:
    """Plain YAML types only (no Python tags): tuples become lists."""
    if isinstance(value, Mapping):
        return {str(k): plain_yaml(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain_yaml(v) for v in value]
    return value


def exit_code_priority(code: int) -> int:
    """The process's exit code from its seeds': a failure (1, 2) over an interruption (75) over success (0)."""
    return {0: 0, EXIT_INTERRUPTED: 1}.get(code, 2)


def run_exit_code(codes: Sequence[int]) -> int:
    return max(codes, key=exit_code_priority)


def train_run(
    exp: Experiment,
    outputs: RunOutputs,
    run_dirs: Sequence[Path],
    stop_requested: Callable[[], str | None] | None = None,
    on_eval: Callable[[int, list[Any]], None] | None = None,
    on_iteration: Callable[[int, Any], None] | None = None,
) -> list[int]:
    """Train every seed into its prepared run folder; one exit code per seed (0 done, 1 failed or
    diverged, 2 a configuration error found late, 75 stopped with a checkpoint, 130 aborted). W&B runs
    are started here and finished with their seed's code, whatever happens."""
    trackers: list[WandbTracker] = []
    codes = [1] * exp.n_seeds
    try:
        if outputs.tracking is not None:
            for index, run_dir in enumerate(run_dirs):
                trackers.append(start_tracking(outputs.tracking, outputs, exp, index, run_dir))
        codes = _train_and_report(exp, outputs, run_dirs, trackers, stop_requested, on_eval, on_iteration)
        return codes
    finally:
        for tracker, code in zip(trackers, codes, strict=False):
            tracker.finish(code)


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


def _train_and_report(
    exp: Experiment,
    outputs: RunOutputs,
    run_dirs: Sequence[Path],
    trackers: Sequence[WandbTracker],
    stop_requested: Callable[[], str | None] | None,
    on_eval: Callable[[int, list[Any]], None] | None,
    on_iteration: Callable[[int, Any], None] | None,
) -> list[int]:
    n_seeds = exp.n_seeds
    seed_outputs = [
        seed_output(outputs, exp, index, run_dirs, trackers[index] if trackers else None) for index in range(n_seeds)
    ]
    try:
        result = train_seeds(
            exp.run,
            exp.algo,
            exp.learner_config,
            seed_outputs,
            on_eval=on_eval,
            on_iteration=on_iteration,
            resume=exp.resume_seeds or None,
            stop_requested=stop_requested,
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
        return [EXIT_ABORTED] * n_seeds
    except Exception:
        traceback.print_exc()
        return [1] * n_seeds
    _summarize_tracking(result, trackers, run_dirs)
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
    if outputs.verbose:
        seeds = f" per seed ({n_seeds} seeds)" if n_seeds > 1 else ""
        models = ", ".join(str(path) for path in result.checkpoints if path is not None)
        print(f"Trained {result.env_steps} env steps{seeds} in {result.wall_time:.1f} s; model: {models}")
    return codes


def _summarize_tracking(result: TrainResult, trackers: Sequence[WandbTracker], run_dirs: Sequence[Path]) -> None:
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


def seed_output(
    outputs: RunOutputs, exp: Experiment, index: int, run_dirs: Sequence[Path], tracker: WandbTracker | None
) -> SeedOutput:
    """Seed `index`'s logger (progress.csv, the console for a one-seed run, TensorBoard, W&B), run folder
    and checkpoints, whose manifest names the group and every seed's folder in a run of several seeds."""
    run_dir = run_dirs[index]
    name = model_name(exp)

    def make_logger(metric_names: Sequence[str]) -> MultiLogger:
        loggers: list[Any] = [CSVLogger(run_dir / "progress.csv", metric_names)]
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
            group=Group(exp.group_id, index, tuple(path.name for path in run_dirs)) if exp.n_seeds > 1 else None,
        ),
    )
    return SeedOutput(make_logger, run_dir, checkpoints)
