"""The study: storage (journal file by default, SQLite or PostgreSQL URLs), sampler, pruner, the
trial budget, stale-trial detection, and the report.

Counting (--max-total-trials): COMPLETE, PRUNED and FAIL trials count, RUNNING ones never (a killed
worker's trial would otherwise hold a place for ever). A failed trial that was retried counts once,
through its retry; a trial that started in a race past the budget is closed at once, marked
`surplus`, and not counted. So workers sharing a study stop at exactly the budget.

Killed workers: with an RDB storage (SQLite, PostgreSQL) Optuna's heartbeat marks a trial whose
worker stopped beating FAIL after the grace period, and `RetryHeartbeatStaleTrialCallback` enqueues it
once more with the same parameters. The journal storage has no heartbeat in Optuna, so rlbench
keeps one: each running trial stamps a system attribute every HEARTBEAT_S, and a worker about to
start a trial fails and retries (once) any RUNNING trial silent for longer than the grace period
(--heartbeat-grace, GRACE_S by default).
"""

from __future__ import annotations

import contextlib
import csv
import json
import threading
import time
import warnings
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, cast

import optuna
from optuna.storages import RetryHeartbeatStaleTrialCallback
from optuna.trial import FrozenTrial, TrialState

from rlbench.errors import ConfigError
from rlbench.redact import redact
from rlbench.tuning import GRACE_S, HEARTBEAT_S, spaces
from rlbench.tuning.stored import HEARTBEAT_ATTR, SURPLUS_ATTR, check_trials, open_journal, trained_hyperparams

if TYPE_CHECKING:
    from matplotlib.axes import Axes

    from rlbench.run.experiment import RunRequest

JOURNAL_LOCK_GRACE_S = 10
FINISHED = (TrialState.COMPLETE, TrialState.PRUNED, TrialState.FAIL)
Pruner = Literal["median", "halving", "hyperband", "none"]
PRUNERS: tuple[Pruner, ...] = ("median", "halving", "hyperband", "none")


class StorageUnavailable(ConnectionError):
    """The storage server refused or could not be reached (exit 1: the same command may work later)."""


def make_storage(url: str, heartbeat_s: int = HEARTBEAT_S, grace_s: int = GRACE_S) -> optuna.storages.BaseStorage:
    """A path (default *.log) is a journal file; sqlite:/// and postgresql:// URLs are RDB storages
    with Optuna's heartbeat and one retry of a failed trial. Errors show the URL with its password masked."""
    if "://" not in url:
        # A worker killed while it appends to the journal leaves the lock behind; the others take it over
        # after JOURNAL_LOCK_GRACE_S (Optuna's default, 30 s, stalls every worker that long). An append holds
        # the lock for milliseconds, so a lock this old has no live holder.
        return open_journal(Path(url), JOURNAL_LOCK_GRACE_S)
    if not url.startswith(("sqlite:", "postgresql", "mysql")):
        raise ConfigError(
            f"--storage {redact(url)!r}: expected a journal file path, sqlite:///..., or "
            "postgresql://user:password@host/db"
        )
    from sqlalchemy.exc import OperationalError

    try:
        with warnings.catch_warnings():
            # Optuna marks the heartbeat and its retry callback experimental; rlbench relies on both (tested).
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            return optuna.storages.RDBStorage(
                url,
                heartbeat_interval=heartbeat_s,
                grace_period=grace_s,
                heartbeat_stale_trial_callback=RetryHeartbeatStaleTrialCallback(max_retry=1),
                engine_kwargs={"pool_pre_ping": True} if not url.startswith("sqlite") else None,
            )
    except OperationalError as error:  # unreachable server, refused credentials
        reason = first_line(error.orig or error)
        raise StorageUnavailable(f"--storage {redact(url)}: cannot connect ({reason})") from None
    except Exception as error:  # a malformed URL, a missing driver
        reason = f"{type(error).__name__}: {first_line(error)}"
        raise ConfigError(f"--storage {redact(url)}: cannot open ({reason})") from None


def first_line(error: BaseException) -> str:
    """The first line of an error's message, credentials masked (driver errors may quote the URL)."""
    return redact(next((line.strip() for line in str(error).splitlines() if line.strip()), type(error).__name__))


def is_rdb(storage: optuna.storages.BaseStorage) -> bool:
    return isinstance(storage, optuna.storages.RDBStorage)


def make_pruner(name: Pruner, n_startup_trials: int, n_evaluations: int) -> optuna.pruners.BasePruner:
    if name == "median":
        return optuna.pruners.MedianPruner(n_startup_trials=n_startup_trials, n_warmup_steps=n_evaluations // 3)
    if name == "halving":
        return optuna.pruners.SuccessiveHalvingPruner(min_resource=1, reduction_factor=4, min_early_stopping_rate=0)
    if name == "hyperband":
        return optuna.pruners.HyperbandPruner(min_resource=1, max_resource=n_evaluations, reduction_factor=3)
    if name == "none":
        return optuna.pruners.NopPruner()
    raise ConfigError(f"--pruner {name!r}: valid: {', '.join(PRUNERS)}")


def create_or_load(storage: optuna.storages.BaseStorage, name: str, url: str) -> optuna.Study:
    """Several processes may create the same study at the same moment (E5): one wins, all load it.
    Optuna logs one line: "A new study created" or "Using an existing study". An existing study's trials
    are checked first (creating appends to a journal even when the study exists)."""
    check_trials(storage, name, url)
    for _ in range(5):
        try:
            return optuna.create_study(storage=storage, study_name=name, direction="maximize", load_if_exists=True)
        except optuna.exceptions.DuplicatedStudyError:
            time.sleep(0.2)
    return optuna.load_study(storage=storage, study_name=name)


def load_existing(storage: optuna.storages.BaseStorage, name: str | None, storage_label: str) -> optuna.Study:
    """The named study, or ConfigError listing the studies the storage holds (E8)."""
    names = [s.study_name for s in storage.get_all_studies()]  # the names only: the trials are checked first
    if name is None or name not in names:
        raise ConfigError(
            f"study {name!r} not found in {redact(storage_label)}; studies there: {', '.join(names) or 'none'}"
        )
    check_trials(storage, name, storage_label)
    return optuna.load_study(storage=storage, study_name=name)


def storage_url(request: RunRequest, env_name: str) -> str:
    return request.storage or str(Path(request.log_folder) / request.algo / f"optuna_{env_name}.log")


def study_name(request: RunRequest, env_name: str) -> str:
    return request.study_name or f"{request.algo}_{env_name}"


def load_trial(request: RunRequest, env_name: str) -> tuple[dict[str, Any], int | None]:
    """--trial-id N: trial N's hyperparameters and seed; ConfigError listing what exists when it does not (E8)."""
    url = storage_url(request, env_name)
    if "://" not in url and not Path(url).exists():
        raise ConfigError(f"--trial-id: no study storage at {redact(url)} (give --storage)")
    try:
        storage = make_storage(url)
    except StorageUnavailable as error:  # train.py shows a ConfigError as one line, before any run folder
        raise ConfigError(f"--trial-id: {error}") from None
    study = load_existing(storage, study_name(request, env_name), redact(url))
    trials = {t.number: t for t in study.get_trials(deepcopy=False)}
    if request.trial_id not in trials:
        raise ConfigError(
            f"--trial-id {request.trial_id}: no such trial in study {study.study_name!r}; trials: "
            f"{', '.join(f'{n} ({t.state.name})' for n, t in sorted(trials.items())) or 'none'}"
        )
    trial = trials[request.trial_id]
    hyperparams = trial.user_attrs.get("hyperparams")  # check_trials: a mapping when present
    if not hyperparams:
        try:
            hyperparams = spaces.to_hyperparams(request.algo, trial.params)
        except (KeyError, TypeError, ValueError):
            raise ConfigError(
                f"--trial-id {request.trial_id}: the trial has no hyperparams attribute and its parameters "
                f"{sorted(trial.params)} are not {request.algo}'s search space"
            ) from None
    return dict(hyperparams), trial.user_attrs.get("seed")


def retried_numbers(trials: list[FrozenTrial]) -> set[int]:
    """Numbers of failed trials whose retry exists (they count through the retry)."""
    return {n for t in trials for n in t.system_attrs.get("retry_history", [])}


def counts(trial: FrozenTrial, retried: set[int]) -> bool:
    return trial.state in FINISHED and not trial.user_attrs.get(SURPLUS_ATTR) and trial.number not in retried


def _places(study: optuna.Study) -> tuple[list[FrozenTrial], list[FrozenTrial]]:
    """(counted trials, trials holding a place in the budget: counted or running, never surplus)."""
    trials = study.get_trials(deepcopy=False)
    retried = retried_numbers(trials)
    counted = [t for t in trials if counts(t, retried)]
    running = [t for t in trials if t.state == TrialState.RUNNING and not t.user_attrs.get(SURPLUS_ATTR)]
    return counted, counted + running


def n_counted(study: optuna.Study) -> int:
    return len(_places(study)[0])


def budget_left(study: optuna.Study, budget: int | None) -> bool:
    """Whether a new trial may start: counted trials plus running ones stay below the budget."""
    return budget is None or len(_places(study)[1]) < budget


def is_surplus(study: optuna.Study, trial: optuna.Trial, budget: int | None) -> bool:
    """Trials are numbered in creation order by the storage, so the trials numbered before this one
    that hold a place (counted or running) decide, the same way in every worker, who is past the budget."""
    if budget is None:
        return False
    return sum(t.number < trial.number for t in _places(study)[1]) >= budget


class Heartbeat:
    """Stamps a running trial every HEARTBEAT_S (journal storage: Optuna beats for RDB storages)."""

    def __init__(self, study: optuna.Study, trial: optuna.Trial, interval_s: float = HEARTBEAT_S):
        self.storage, self.trial_id, self.interval_s = study._storage, trial._trial_id, interval_s
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._beat, daemon=True)

    def _beat(self) -> None:
        while not self.stop.is_set():
            try:
                self.storage.set_trial_system_attr(self.trial_id, HEARTBEAT_ATTR, time.time())
            except Exception:  # the trial was finished meanwhile: nothing to stamp
                return
            self.stop.wait(self.interval_s)

    def __enter__(self) -> Heartbeat:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join(timeout=5)


def fail_stale_journal_trials(study: optuna.Study, grace_s: float = GRACE_S) -> list[int]:
    """FAIL (and retry once) RUNNING trials silent for longer than grace_s; returns their numbers."""
    now, failed = time.time(), []
    for trial in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
        started = trial.datetime_start.timestamp() if trial.datetime_start else now
        last_seen = max(started, trial.system_attrs.get(HEARTBEAT_ATTR, 0.0))
        if now - last_seen > grace_s:
            try:
                study._storage.set_trial_state_values(trial._trial_id, TrialState.FAIL)
            except Exception:  # another worker failed it first, or it just finished
                continue
            RetryHeartbeatStaleTrialCallback(max_retry=1)(study, study._storage.get_trial(trial._trial_id))
            failed.append(trial.number)
    return failed


def fail_running_trials(study: optuna.Study, worker: str) -> list[int]:
    """FAIL the RUNNING trials of one worker (its `worker` attribute, host:pid); returns their numbers."""
    failed = []
    for trial in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
        if trial.user_attrs.get("worker") == worker:
            with contextlib.suppress(Exception):  # it finished meanwhile
                study._storage.set_trial_state_values(trial._trial_id, TrialState.FAIL)
                failed.append(trial.number)
    return failed


def write_report(
    study: optuna.Study,
    folder: Path,
    stem: str,
    algo: str,
    env_id: str,
    base_hyperparams: Mapping[str, Any],
    plots: bool,
) -> dict[str, Path]:
    """trials CSV, best parameters (JSON), a ready-to-use hyperparameter entry (YAML) and plots (PNG).
    Written whether or not any trial completed."""
    import yaml

    folder.mkdir(parents=True, exist_ok=True)
    trials = study.get_trials(deepcopy=False)
    paths = {"trials": folder / f"{stem}.csv"}
    param_names = sorted({name for t in trials for name in t.params})
    with paths["trials"].open("w", newline="") as file:
        writer = csv.writer(file)
        writer.writerow(["number", "state", "value", "duration_s", "seed", *param_names, "hyperparams"])
        for t in trials:
            duration = t.duration.total_seconds() if t.duration else ""
            writer.writerow(
                [
                    t.number,
                    t.state.name,
                    "" if t.value is None else t.value,
                    duration,
                    t.user_attrs.get("seed", ""),
                    *[t.params.get(n, "") for n in param_names],
                    json.dumps(trained_hyperparams(t), sort_keys=True),
                ]
            )
    complete = [t for t in trials if t.state == TrialState.COMPLETE]
    if complete:
        best = max(complete, key=lambda t: cast(float, t.value))  # a COMPLETE trial has its value
        paths["best"] = folder / f"{stem}_best.json"
        paths["best"].write_text(
            json.dumps(
                {
                    "number": best.number,
                    "value": best.value,
                    "params": best.params,
                    "hyperparams": trained_hyperparams(best),
                },
                indent=2,
            )
            + "\n"
        )
        # What the best trial ran with: file entry, its sampled values and -params, resolved.
        entry = best.user_attrs.get("config") or {**dict(base_hyperparams), **best.user_attrs.get("hyperparams", {})}
        paths["entry"] = folder / f"{stem}_best.yml"
        header = f"# best of {len(complete)} complete trials (trial {best.number}, value {best.value:.2f})\n"
        paths["entry"].write_text(header + yaml.safe_dump({env_id: entry}, sort_keys=True))
    if plots and complete:
        paths |= _plots(study, folder, stem, len(complete))
    return paths


def _plots(study: optuna.Study, folder: Path, stem: str, n_complete: int) -> dict[str, Path]:
    """The study's plots; none, with a note, without matplotlib (the tuning extra, not a base dependency:
    the report's CSV, JSON and YAML are what a plain install needs)."""
    try:
        import matplotlib
    except ImportError:
        print(
            'Note: plots skipped, matplotlib is not installed: pip install -e ".[tuning]" (or pip install '
            "matplotlib) for them, --no-optim-plots to skip them without this note"
        )
        return {}

    matplotlib.use("Agg")  # files only, never a window
    import matplotlib.pyplot as plt
    from matplotlib.figure import Figure
    from optuna.visualization import matplotlib as optuna_plots

    out = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # optuna marks its matplotlib backend experimental
        plotters: list[tuple[str, Callable[[optuna.Study], Axes]]] = [
            ("history", optuna_plots.plot_optimization_history)
        ]
        if n_complete >= 2:
            plotters.append(("importance", optuna_plots.plot_param_importances))
        for name, plot in plotters:
            try:
                axes = plot(study)
            except (ValueError, RuntimeError) as error:  # e.g. importances of a constant objective
                print(f"Plot {name} skipped: {error}")
                continue
            path = folder / f"{stem}_{name}.png"
            figure = axes.figure
            assert isinstance(figure, Figure), "optuna plots on a figure of its own"
            figure.savefig(path, dpi=100, bbox_inches="tight")
            plt.close(figure)
            out[name] = path
    return out
