"""What a study holds, read back as untrusted input: its journal file, the attributes of its trials, and the
CMA-ES state Optuna unpickles from them. An edited or forged study is refused in one line (ConfigError, exit
2) naming the file or trial and what would be valid, before -optimize or --trial-id writes anything.

Optuna's JournalFileBackend parses each line itself and replays it into the study, and what it meets there
escapes as a traceback: a non-JSON line is a JSONDecodeError (or is skipped when it is the last line, then
fails once another record follows it), a record nested 100,000 deep a RecursionError, a record of the wrong
shape a KeyError, TypeError or AssertionError. So the file is checked line by line first (check_journal),
and the replay Optuna does when the storage opens is where everything else is caught (open_journal). The
attributes rlbench reads back are checked by type and range (check_trials): Optuna stores any JSON there.
"""

from __future__ import annotations

import io
import math
import pickle
import pickletools
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import optuna
from optuna.storages.journal import JournalFileBackend, JournalFileSymlinkLock, JournalStorage
from optuna.trial import FrozenTrial, TrialState

from rlbench.errors import ConfigError
from rlbench.files import UntrustedFileError, check_tree, parse_json
from rlbench.redact import redact
from rlbench.run.experiment import MAX_SEED

# One journal record: a trial's `config` attribute (the resolved entry, the largest record rlbench writes)
# is about 1.5 KB, a CMA-ES state chunk 2 KB; a line is read at most this far.
MAX_RECORD_BYTES = 1 << 20
JOURNAL_OPS = {int(op) for op in optuna.storages.journal._storage.JournalOperation}  # not exported by Optuna
EDITED = "the study was edited, or written by something other than rlbench and Optuna"
HEARTBEAT_ATTR = "rlbench_heartbeat"  # a running trial's last sign of life (journal storage: rlbench's heartbeat)
SURPLUS_ATTR = "surplus"  # a trial started past --max-total-trials, closed at once and never counted


def check_journal_path(path: Path) -> None:
    """A journal is a regular file (or not there yet): a directory or a FIFO would fail or block in Optuna."""
    if path.exists() and not path.is_file():
        kind = "a directory" if path.is_dir() else "not a regular file"
        raise ConfigError(
            f"--storage {path}: {kind}; a journal storage is a file path (e.g. {path / 'optuna.log'}), "
            "or give an sqlite:/// or postgresql:// URL"
        )


def check_journal(path: Path) -> None:
    """Every complete line of the journal is one JSON object with a known `op_code`, nested within the bound
    of any file rlbench reads. A last line without its newline is a record another worker is appending:
    Optuna reads it once complete, and so do these checks on the next start."""
    with open(path, "rb") as file:
        number = 0
        while line := file.readline(MAX_RECORD_BYTES + 1):
            number += 1
            if not line.endswith(b"\n"):
                if len(line) > MAX_RECORD_BYTES:
                    raise ConfigError(
                        f"study journal {path}, line {number}: longer than {MAX_RECORD_BYTES} bytes, more than "
                        f"one record holds; {EDITED}"
                    )
                return
            try:
                record = parse_json(line)
            except UntrustedFileError as error:
                raise ConfigError(
                    f"study journal {path}, line {number}: unreadable ({error}); an Optuna journal holds one JSON "
                    f"record per line; {EDITED}"
                ) from None
            op_code = record.get("op_code") if isinstance(record, dict) else None
            if type(op_code) is not int or op_code not in JOURNAL_OPS:
                raise ConfigError(
                    f"study journal {path}, line {number}: not an Optuna journal record (op_code {shown(op_code)}, "
                    f"expected one of {sorted(JOURNAL_OPS)}); {EDITED}"
                )


def open_journal(path: Path, lock_grace_s: int) -> JournalStorage:
    """The journal storage at `path`, checked; Optuna's replay of the file, where a record of the wrong shape
    fails, as one ConfigError."""
    check_journal_path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.exists():
            check_journal(path)
        lock = JournalFileSymlinkLock(str(path), grace_period=lock_grace_s)
        return JournalStorage(JournalFileBackend(str(path), lock_obj=lock))
    except ConfigError:
        raise
    except OSError as error:
        raise ConfigError(f"--storage {path}: cannot open the journal ({error.strerror or error})") from None
    except Exception as error:  # the replay of an edited record: KeyError, TypeError, AssertionError, ...
        raise ConfigError(f"study journal {path}: Optuna cannot replay it ({reason(error)}); {EDITED}") from None


def reason(error: BaseException) -> str:
    """An exception as one short line: its type (a KeyError's message is only the key) and message."""
    if isinstance(error, RecursionError):
        return "nested too deeply to parse"
    text = str(error) if isinstance(error, UntrustedFileError) else f"{type(error).__name__}: {error}"
    return " ".join(text.split())[:200]


def shown(value: object) -> str:
    """A stored value in a message: its repr, cut short (a forged one can be a megabyte)."""
    text = repr(value)
    return text if len(text) <= 60 else f"{text[:57]}..."


def is_number(value: Any) -> bool:
    return type(value) in (int, float) and not math.isnan(value)


def is_seed(value: Any) -> bool:
    return type(value) is int and 0 <= value <= MAX_SEED


def is_count(value: Any) -> bool:
    return type(value) is int and value >= 0


def is_entry(value: Any) -> bool:
    return isinstance(value, Mapping) and all(isinstance(key, str) for key in value)


# The attributes rlbench (and Optuna's retry of failed trials) reads back: (valid, what would be valid).
Check = tuple[Callable[[Any], bool], str]
USER_ATTRS: dict[str, Check] = {
    "seed": (is_seed, "an integer seed in [0, 2**32-1]"),
    "hyperparams": (is_entry, "a mapping of hyperparameter names to values"),
    "config": (is_entry, "a mapping of hyperparameter names to values"),
    "worker": (lambda value: isinstance(value, str), "a string host:pid"),
    SURPLUS_ATTR: (lambda value: type(value) is bool, "true or false"),
    "seed_values": (lambda value: isinstance(value, list) and all(map(is_number, value)), "a list of numbers"),
}
SYSTEM_ATTRS: dict[str, Check] = {
    HEARTBEAT_ATTR: (is_number, "a time in seconds"),
    "retry_history": (lambda value: isinstance(value, list) and all(map(is_count, value)), "a list of trial numbers"),
    "failed_trial": (is_count, "a trial number"),
    "fixed_params": (  # a retried trial's parameters, which Optuna's sampler takes as they are
        lambda value: is_entry(value) and all(type(v) in (int, float, str, bool) for v in value.values()),
        "a mapping of parameter names to numbers or strings",
    ),
}


def check_trials(storage: optuna.storages.BaseStorage, name: str, url: str) -> None:
    """Refuse study `name` (when `storage` holds it) if a trial's value, intermediate values or an attribute
    rlbench reads back is of the wrong type or range, or if a CMA-ES state stored in it holds anything but
    CMA-ES's own classes and numpy arrays (Optuna unpickles it: a forged one would run code)."""
    try:
        study_id = storage.get_study_id_from_name(name)
    except KeyError:
        return  # a new study
    where = f"study {name!r} in {redact(url)}"
    try:
        trials = storage.get_all_trials(study_id, deepcopy=False)
        for trial in trials:
            check_tree([trial.user_attrs, trial.system_attrs])
    except (UntrustedFileError, RecursionError, ValueError, LookupError, TypeError) as error:  # JSON in an RDB
        raise ConfigError(f"{where}: unreadable ({reason(error)}); {EDITED}") from None
    for trial in trials:
        problem = trial_problem(trial)
        if problem:
            raise ConfigError(f"{where}: trial {trial.number}: {problem}; {EDITED}")


def trial_problem(trial: FrozenTrial) -> str | None:
    """What is wrong with one stored trial, or None."""
    if trial.state == TrialState.COMPLETE and not (trial.values and len(trial.values) == 1 and is_number(trial.value)):
        return f"value {shown(trial.values)}, expected one number"
    for step, value in trial.intermediate_values.items():
        if not (is_count(step) and type(value) in (int, float)):
            return f"intermediate value {shown(step)}: {shown(value)}, expected a step and a number"
    for kind, attrs, checks in (("user", trial.user_attrs, USER_ATTRS), ("system", trial.system_attrs, SYSTEM_ATTRS)):
        for key, (valid, expected) in checks.items():
            if key in attrs and not valid(attrs[key]):
                return f"{kind} attribute {key!r} is {shown(attrs[key])}, expected {expected}"
    return cma_state_problem(trial.system_attrs)


# What Optuna's CmaEsSampler pickles (cmaes 0.12, numpy 1.x and 2.x): nothing else may be unpickled.
CMA_STATE_PREFIXES = ("cma:optimizer", "sepcma:optimizer", "cmawm:optimizer")
CMA_STATE_GLOBALS = {
    ("cmaes._cma", "CMA"),
    ("cmaes._sepcma", "SepCMA"),
    ("cmaes._cmawm", "CMAwM"),
    ("numpy", "dtype"),
    ("numpy", "ndarray"),
    *(
        (module, name)
        for module in ("numpy.core.multiarray", "numpy._core.multiarray")
        for name in ("_reconstruct", "scalar")
    ),
}


class _CmaState:
    """Stands in for a CMA-ES class when cmaes is not installed (then no sampler of this process unpickles)."""

    def __setstate__(self, state: Any) -> None:
        self.state = state


class _CmaStateUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        if (module, name) not in CMA_STATE_GLOBALS:
            raise pickle.UnpicklingError(f"it refers to {module}.{name}, which a CMA-ES state never holds")
        try:
            return super().find_class(module, name)
        except ImportError:
            return _CmaState


def check_memo_indices(data: bytes) -> None:
    """The C unpickler sizes its memo table to the largest index a PUT names, and zeroes it: a 20-byte pickle
    naming index 2**32-1 would allocate and touch 32 GB. An honest pickle's indices count its own objects."""
    for opcode, arg, _ in pickletools.genops(data):
        if opcode.name in ("PUT", "BINPUT", "LONG_BINPUT") and arg is not None and int(arg) > len(data):
            raise pickle.UnpicklingError(f"memo index {arg} past the pickle's {len(data)} bytes")


def cma_state_problem(system_attrs: Mapping[str, Any]) -> str | None:
    """Optuna joins a trial's `<prefix>:<i>` attributes (i = 0, 1, ...) into hex and unpickles it: the same
    bytes are unpickled here first, with nothing but CMA-ES's and numpy's classes allowed."""
    for prefix in CMA_STATE_PREFIXES:
        keys = [key for key in system_attrs if key.startswith(prefix)]
        if not keys:
            continue
        expected = [f"{prefix}:{index}" for index in range(len(keys))]
        if sorted(keys) != sorted(expected) or not all(isinstance(system_attrs[key], str) for key in keys):
            return f"CMA-ES state attributes {shown(sorted(keys))}, expected strings {prefix}:0, {prefix}:1, ..."
        try:
            data = bytes.fromhex("".join(system_attrs[key] for key in expected))
            check_memo_indices(data)
            _CmaStateUnpickler(io.BytesIO(data)).load()
        except Exception as error:  # a bad hex digit, a truncated pickle, a forbidden class, a bad state
            return f"CMA-ES state {prefix} cannot be restored safely ({' '.join(str(error).split())[:120]})"
    return None


def trained_hyperparams(trial: FrozenTrial) -> dict[str, Any]:
    """The trial's sampled hyperparameters with the values it trained with: -params override sampled ones,
    and the `config` attribute holds the resolved entry that ran (policy_kwargs: the sampled keys of it)."""
    sampled = dict(trial.user_attrs.get("hyperparams") or {})
    ran = trial.user_attrs.get("config") or {}
    trained: dict[str, Any] = {}
    for key, value in sampled.items():
        if key == "policy_kwargs" and isinstance(value, Mapping) and isinstance(ran.get(key), Mapping):
            trained[key] = {name: ran[key].get(name, sub) for name, sub in value.items()}
        else:
            trained[key] = ran.get(key, value)
    return trained
