"""The layers of a run's hyperparameter entry, lowest first: the algorithm's preset under a hyperparameter
file's entry for the env (or a checkpoint's saved, resolved entry on resume, or a benchmark's own), an Optuna
trial's values (-optimize, --trial-id), then -params. Each layer is parsed and bounded as it comes in; a
stored trial's values are checked on their own, so that an error names the trial, not the file.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from rlbench.config import hyperparams
from rlbench.config.algorithm import Algorithm
from rlbench.config.entry import normalize_entry, split_entry
from rlbench.config.literals import LiteralError, parse_key_values
from rlbench.config.values import positive_int
from rlbench.envs.make import env_file_name
from rlbench.envs.wrappers import trusted_modules
from rlbench.errors import ConfigError
from rlbench.run.request import RunRequest
from rlbench.store.checkpoint import Checkpoint

# --trial-id's source of a stored trial: (its hyperparameters, its seed) from the request and the env's file
# name. The front end that reads studies passes it (rlbench.tuning.study.load_trial), so that resolving a
# run never imports the tuning front end.
TrialLoader = Callable[[RunRequest, str], tuple[dict[str, Any], int | None]]


@dataclass(frozen=True)
class Layers:
    """The hyperparameter entry's layers: the base (a file's entry over the preset, a checkpoint's saved
    one, or a benchmark's), an Optuna trial's values over it, and -params over both."""

    source: str  # the file, checkpoint or benchmark the base comes from
    base: dict[str, Any]  # with the trial's values
    overrides: dict[str, Any]  # -params
    merged: dict[str, Any]
    resume: Checkpoint | None
    trial_seed: int | None  # --trial-id's stored seed


def entry_layers(
    request: RunRequest,
    algo: Algorithm,
    resume: Checkpoint | None,
    trial_overrides: Mapping[str, Any] | None,
    load_trial: TrialLoader | None,
) -> Layers:
    """The base entry (`resume`'s when resuming), the trial's values over it (`trial_overrides`, or
    --trial-id's from `load_trial`) and -params over both."""
    source, base = base_entry(request, algo, resume)
    trial_seed = None
    if trial_overrides is None and request.trial_id is not None:
        if load_trial is None:
            raise ConfigError(f"--trial-id {request.trial_id}: this command does not read Optuna studies")
        trial_overrides, trial_seed = load_trial(request, env_file_name(request.env))  # as -optimize names its study
    if trial_overrides and request.trial_id is not None:  # a stored trial's values: untrusted, named as such
        check_trial_entry(algo, base, trial_overrides, f"--trial-id {request.trial_id}", trusted(request))
    if trial_overrides:
        base = hyperparams.merge(base, normalize_entry(dict(trial_overrides), "the Optuna trial"))
    try:
        overrides = normalize_entry(parse_key_values(request.params, "-params"), "-params")
    except LiteralError as error:
        raise ConfigError(str(error)) from None
    return Layers(source, base, overrides, hyperparams.merge(base, overrides), resume, trial_seed)


def base_entry(request: RunRequest, algo: Algorithm, resume: Checkpoint | None) -> tuple[str, dict[str, Any]]:
    """(source, entry): a checkpoint's saved, resolved hyperparameters (no file is read), the request's own
    entry (a benchmark's), or the file's entry for the env over the algorithm's preset."""
    if resume is not None:
        return str(resume.path), dict(resume.manifest.run.hyperparams)
    if request.entry is not None:
        source = "the benchmark's hyperparameters"
        return source, hyperparams.merge(algo.preset, normalize_entry(dict(request.entry), source))
    source = request.conf_file or str(hyperparams.default_file(algo.name))
    entry = hyperparams.select_entry(hyperparams.read_file(source), request.env, source, request.verbose)
    return source, hyperparams.merge(algo.preset, normalize_entry(entry, source))


T = TypeVar("T")


def checked_in_layers(layers: Layers, check: Callable[[Mapping[str, Any], str], T]) -> T:
    """`check(layers.merged, where)`; a ConfigError it raises names the one layer at fault, not "file /
    -params": the base's source when the base entry alone fails the same way, else -params (a key only
    -params has, or its value over the base's)."""
    try:
        return check(layers.merged, layers.source)
    except ConfigError as error:
        if not layers.overrides:
            raise
        try:
            check(layers.base, layers.source)
        except ConfigError as base_error:
            if str(base_error) == str(error):
                raise error from None
        check(layers.merged, "-params")  # raises the same error, naming -params
        raise


def trusted(request: RunRequest) -> tuple[str, ...]:
    """The modules whose wrappers env_wrapper may name: gymnasium's, rlbench's, --gym-packages, --trust-wrappers."""
    return trusted_modules([*request.gym_packages, *request.trust_wrappers])


def check_trial_entry(
    algo: Algorithm, base: Mapping[str, Any], trial: Mapping[str, Any], name: str, trusted: Iterable[str]
) -> None:
    """ConfigError naming the stored trial (`name`) when its hyperparameters make a valid entry invalid. An
    entry that is invalid without them is left to the checks that name the file."""

    def build(entry: Mapping[str, Any], where: str) -> None:
        run_keys, _, learner_keys = split_entry(entry, where, trusted)
        algo.build_config(learner_keys, positive_int(run_keys.get("n_envs", 1), "n_envs"), where)

    try:
        build(base, "the file")
    except ConfigError:
        return
    where = f"the hyperparameters stored with {name}"
    try:
        build(hyperparams.merge(base, normalize_entry(dict(trial), where)), where)
    except ConfigError as error:
        raise ConfigError(f"{name}: the trial's stored hyperparameters are invalid: {error}") from None
