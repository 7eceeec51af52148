"""What a run writes besides its training: its RL Zoo run folders and their files.

`RunOutputs` says where and what (train.py's flags, or a sweep's, a tuning trial's, a benchmark row's);
this module claims one run folder per seed (`<log>/<algo>/<env>_<N>`, an exclusive mkdir each, so two runs
started at once never share one) and writes config.yml, args.yml and command.txt into it, atomically. A
start that fails or is stopped by a signal removes what it claimed.
"""

from __future__ import annotations

import errno
import shlex
import shutil
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from rlbench.config.literals import parse_key_values
from rlbench.envs.make import env_file_name
from rlbench.files import atomic_write_text, naming
from rlbench.redact import redact_values
from rlbench.run.experiment import Experiment
from rlbench.run.signals import start_step
from rlbench.store.checkpoint import Checkpoint
from rlbench.store.host_state import Evaluations


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
    `continuation` is the command that continues this run once `-i CHECKPOINT` is added (train.py: the
    flags that shaped it); when a stop leaves a checkpoint it is printed and written into command.txt.
    `final_evaluation`: evaluate each finished seed's final model at its end when no scheduled evaluation
    fell on its last env step, and record it in the run folder (rlbench.run.final_eval; train.py).
    `run_folders=False` is an in-process run (an Optuna trial, a benchmark row): no run folder, no file, no
    logger, no checkpoint; each seed may still keep its evaluations.npz in `seed_folders`.
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
    continuation: tuple[str, ...] = ()
    final_evaluation: bool = False
    run_folders: bool = True
    seed_folders: tuple[Path | None, ...] = ()  # with run_folders=False: one per seed (-optimize's trial folders)


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


def write_run_files(run_dir: Path, exp: Experiment, seed: int, outputs: RunOutputs) -> None:
    """config.yml, args.yml and command.txt in `<run_dir>/<env_id>/`, as RL Zoo lays them out (args.yml with
    this folder's seed, and the group id in a run of several seeds; command.txt retrains this seed alone);
    written atomically, with credentials (a --storage password) masked. A resumed run's folder also gets
    the evaluation history its checkpoint carries, at once: the folder holds the whole history even when
    the continuation evaluates nothing."""
    params_dir = run_dir / model_name(exp)
    params_dir.mkdir()
    group = {"group": exp.group_id} if exp.n_seeds > 1 else {}
    saved_args = redact_values(dict(sorted({**zoo_args(outputs.saved_args), "seed": seed, **group}.items())))
    files = {
        "config.yml": yaml.safe_dump(plain_yaml(exp.hyperparams), sort_keys=True),
        "args.yml": yaml.safe_dump(plain_yaml(saved_args), sort_keys=True),
        "command.txt": seed_command(exp, seed, outputs) + "\n",
    }
    for name, text in files.items():
        with naming(params_dir / name):
            atomic_write_text(params_dir / name, text)
    if exp.resume_seeds:
        carried = carried_evaluations(exp.resume_seeds[exp.seeds.index(seed)])
        if carried.timesteps:
            with naming(run_dir / "evaluations.npz"):
                carried.save(run_dir / "evaluations.npz")


def seed_command(exp: Experiment, seed: int, outputs: RunOutputs) -> str:
    """command.txt of `seed`'s folder: the run's command, or in a run of several seeds, that seed alone."""
    if exp.n_seeds == 1:
        return outputs.command
    index = exp.seeds.index(seed)
    return seed_alone_command(outputs.command, seed, exp.resume_seeds[index].path if exp.resume_seeds else None)


def carried_evaluations(checkpoint: Checkpoint) -> Evaluations:
    """The evaluation history a checkpoint carries (evaluations.npz's arrays, checked by its reader)."""
    host = checkpoint.group("host")
    return Evaluations.from_arrays({name: host[f"eval_{name}"] for name in ("timesteps", "results", "ep_lengths")})


def resume_command(exp: Experiment, outputs: RunOutputs, checkpoint: Path) -> str:
    """The command that continues this run from `checkpoint`, shell-quoted: the flags that shaped it
    (`outputs.continuation`) with `-i`, or where the front end gives none, the algorithm and env alone."""
    base = outputs.continuation or ("python", "train.py", "--algo", exp.algo.name, "--env", exp.run.env_id)
    return shlex.join([*base, "-i", str(checkpoint)])


def record_stop(
    exp: Experiment, outputs: RunOutputs, run_dirs: Sequence[Path], checkpoints: Sequence[Path | None], why: str
) -> None:
    """After a stop that left checkpoints, each seed's command.txt continues its run (in a run of several
    seeds, that seed alone, as its command.txt trains it), under a comment with the command that started
    the folder: running the file continues the run where it stopped. Only where the front end gives its
    continuation (train.py): a sweep continues its own cells."""
    if not outputs.continuation:
        return
    for seed, run_dir, checkpoint in zip(exp.seeds, run_dirs, checkpoints, strict=True):
        if checkpoint is None:
            continue
        command = resume_command(exp, outputs, checkpoint)
        if exp.n_seeds > 1:
            command = seed_alone_command(command, seed, checkpoint)
        started = seed_command(exp, seed, outputs).replace("\n", " ")  # a comment of one line
        path = run_dir / model_name(exp) / "command.txt"
        with naming(path):
            atomic_write_text(path, f"# {why}; started with: {started}\n{command}\n")


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
    replaced: tuple[str, ...]
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


def plain_yaml(value: object) -> Any:
    """Plain YAML types only (no Python tags): tuples become lists."""
    if isinstance(value, Mapping):
        return {str(k): plain_yaml(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain_yaml(v) for v in value]
    return value
