"""Samplers: random, TPE (multivariate), CMA-ES and OptunaHub's AutoSampler, each seeded per worker.

Seeds: a worker's sampler is built at its first trial, seeded from (--seed, that trial's number). The
storage numbers trials atomically, so no two workers share a seed, whatever process, machine or rerun
they belong to, and the first worker of a fresh study (trial 0) draws the same trials for the same
--seed.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Callable, Sequence
from typing import Any, Literal

import numpy as np
import optuna
from optuna.distributions import BaseDistribution
from optuna.trial import FrozenTrial, TrialState

from rlbench.errors import ConfigError

Sampler = Literal["random", "tpe", "cmaes", "auto"]
SAMPLERS: tuple[Sampler, ...] = ("random", "tpe", "cmaes", "auto")
# OptunaHub's AutoSampler is code in the OptunaHub registry (a GitHub repository) that optunahub fetches
# and caches at first use. Pinned: what runs is the code that was read, not whatever the branch holds today.
AUTO_SAMPLER = "samplers/auto_sampler"
AUTO_SAMPLER_REF = "23b5b24eb52a81631047e1d6ed53773d5b6795c0"
AUTO_FETCH_TIMEOUT_S = 20


def make_sampler(name: Sampler, seed: int, n_startup_trials: int) -> optuna.samplers.BaseSampler:
    """A worker's sampler, seeded at its first trial (see the module docstring)."""
    return FirstTrialSeeded(lambda first_trial_seed: _sampler(name, first_trial_seed, n_startup_trials), seed)


def sampler_seed(seed: int, first_trial: int) -> int:
    """The sampler seed of the worker whose first trial is `first_trial` (apart from the trials' own seeds)."""
    return int(np.random.SeedSequence([seed, first_trial, 1]).generate_state(1)[0] % (2**31 - 1))


class FirstTrialSeeded(optuna.samplers.BaseSampler):
    """Builds the sampler at the worker's first trial, seeded with sampler_seed(seed, that trial's number),
    then passes every call on to it. Optuna calls before_trial first for every trial."""

    def __init__(self, build: Callable[[int], optuna.samplers.BaseSampler], seed: int) -> None:
        self._build, self._seed = build, seed
        self._sampler: optuna.samplers.BaseSampler | None = None

    def before_trial(self, study: optuna.Study, trial: FrozenTrial) -> None:
        if self._sampler is None:
            self._sampler = self._build(sampler_seed(self._seed, trial.number))
        self._sampler.before_trial(study, trial)

    def _built(self) -> optuna.samplers.BaseSampler:
        assert self._sampler is not None, "Optuna calls before_trial first, which builds the sampler"
        return self._sampler

    def infer_relative_search_space(self, study: optuna.Study, trial: FrozenTrial) -> dict[str, BaseDistribution]:
        return self._built().infer_relative_search_space(study, trial)

    def sample_relative(
        self, study: optuna.Study, trial: FrozenTrial, search_space: dict[str, BaseDistribution]
    ) -> dict[str, Any]:
        return self._built().sample_relative(study, trial, search_space)

    def sample_independent(
        self, study: optuna.Study, trial: FrozenTrial, param_name: str, param_distribution: BaseDistribution
    ) -> Any:  # the parameter's value, of its distribution's kind
        return self._built().sample_independent(study, trial, param_name, param_distribution)

    def after_trial(
        self, study: optuna.Study, trial: FrozenTrial, state: TrialState, values: Sequence[float] | None
    ) -> None:
        self._built().after_trial(study, trial, state, values)

    def reseed_rng(self) -> None:
        if self._sampler is not None:
            self._sampler.reseed_rng()


def _sampler(name: Sampler, seed: int, n_startup_trials: int) -> optuna.samplers.BaseSampler:
    if name == "auto":
        import optunahub  # fetch_auto_sampler checked it and filled optunahub's cache: no network here

        return optunahub.load_module(AUTO_SAMPLER, ref=AUTO_SAMPLER_REF).AutoSampler(seed=seed)
    if name == "random":
        return optuna.samplers.RandomSampler(seed=seed)
    if name == "tpe":
        return optuna.samplers.TPESampler(n_startup_trials=n_startup_trials, seed=seed, multivariate=True)
    if name == "cmaes":
        return optuna.samplers.CmaEsSampler(
            n_startup_trials=n_startup_trials, seed=seed, warn_independent_sampling=False
        )
    raise ConfigError(f"--sampler {name!r}: valid: {', '.join(SAMPLERS)}")


def fetch_auto_sampler() -> None:
    """Make sure OptunaHub's AutoSampler loads: ConfigError (one line naming the other samplers) when
    optunahub or the sampler's dependencies are missing or its code cannot be fetched. The first load
    fetches the code from GitHub (git or the GitHub API); it runs in a child process so that an
    unreachable network costs at most AUTO_FETCH_TIMEOUT_S, never a hang. Later loads use the cache."""
    others = f"use --sampler {', '.join(s for s in SAMPLERS if s != 'auto')} instead"
    try:
        import optunahub  # noqa: F401
    except ImportError:
        raise ConfigError(f"--sampler auto needs optunahub (pip install optunahub); {others}") from None
    load = (
        "import sys, optunahub\n"
        "try:\n"
        "    optunahub.load_module(sys.argv[1], ref=sys.argv[2])\n"
        "except Exception as error:\n"
        "    sys.exit(' '.join(str(error).split()) or type(error).__name__)\n"
    )
    # Its own session, so that on a timeout or Ctrl-C the whole group (git included) can be killed.
    child = subprocess.Popen(
        [sys.executable, "-c", load, AUTO_SAMPLER, AUTO_SAMPLER_REF],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        _, stderr = child.communicate(timeout=AUTO_FETCH_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        stderr = f"no answer within {AUTO_FETCH_TIMEOUT_S} s"
    finally:
        if child.poll() is None:
            os.killpg(child.pid, signal.SIGKILL)
            child.wait()
    if child.returncode == 0:
        return
    reason = (stderr.strip().splitlines() or [f"exit code {child.returncode}"])[-1][:300]
    raise ConfigError(
        f"--sampler auto: cannot load OptunaHub's AutoSampler ({reason}); it is fetched "
        f"from GitHub once, then cached, and needs cmaes, scipy and torch; {others}"
    )
