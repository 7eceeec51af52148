"""A study read back is untrusted input (issue 32 item 12): a --storage that is a directory, a journal file
edited by hand or forged (a non-JSON line, JSON nested 100,000 deep, a record Optuna cannot replay, a trial
attribute of the wrong type or range, a CMA-ES state that would run code when Optuna unpickles it) is one
line and exit 2, from -optimize and from --trial-id alike, before anything is written: the journal is
unchanged, no report, no run folder."""

from __future__ import annotations

import json
import os
import pickle
import shutil
import sqlite3

import optuna
import pytest

from rlbench.cli.train import main
from rlbench.tuning.stored import check_trials
from rlbench.tuning.study import make_storage
from tests.conftest import TINY_LEARNER

ARGV = ["--algo", "sac", "--env", "Pendulum-v1", "-n", "300", "--seed", "3", "--verbose", "0", "-params"]
ARGV += TINY_LEARNER
JOURNAL = "optuna_Pendulum-v1.log"


@pytest.fixture(scope="module")
def journal(tmp_path_factory):
    """The journal of a real one-trial study: the lines the tests edit."""
    logs = tmp_path_factory.mktemp("study") / "logs"
    argv = ["-f", str(logs), "-optimize", *ARGV, "--n-evaluations", "1", "--n-trials", "1", "--no-optim-plots"]
    assert main([*argv, "--sampler", "random", "--pruner", "none"]) == 0
    return (logs / "sac" / JOURNAL).read_text().splitlines(keepends=True)


def set_attr(lines, key, value):
    """The study's lines with the last record that set the trial's attribute `key` setting `value` instead."""
    for index, line in reversed(list(enumerate(lines))):
        record = json.loads(line)
        for kind in ("user_attr", "system_attr"):
            if key in record.get(kind, {}):
                record[kind][key] = value
                return [*lines[:index], json.dumps(record) + "\n", *lines[index + 1 :]]
    raise AssertionError(f"no record sets {key}")


class RunsCode:
    """A pickle that runs a command when unpickled (what a forged CMA-ES state can hold)."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def cma_state(lines, marker):
    """The study's lines with a CMA-ES state on trial 0 (set while it runs, as Optuna's sampler does)."""
    state = {"cma:optimizer:0": pickle.dumps(RunsCode(marker)).hex()}
    record = {"op_code": 9, "worker_id": "forged", "trial_id": 0, "system_attr": state}
    return [*lines[:3], json.dumps(record) + "\n", *lines[3:]]


FORGED = {
    "a non-JSON line": (lambda lines, _: [*lines[:3], "hello\n", *lines[3:]], "line 4: unreadable (Expecting value"),
    "a non-JSON last line": (lambda lines, _: [*lines, "hello\n"], "unreadable (Expecting value"),
    "JSON 100,000 deep": (
        lambda lines, _: [*lines[:3], "[" * 100_000 + "]" * 100_000 + "\n", *lines[3:]],
        "line 4: unreadable (nested too deeply to parse)",
    ),
    "a line over 1 MiB": (
        lambda lines, _: [*lines, '{"op_code": 2, "pad": "' + "a" * (1 << 20) + '"}\n'],
        "longer than 1048576 bytes, more than one record holds",
    ),
    "an unknown op_code": (
        lambda lines, _: [*lines, '{"op_code": 99}\n'],
        "not an Optuna journal record (op_code 99, expected one of [0, 1,",
    ),
    "a record Optuna cannot replay": (
        lambda lines, _: [*lines, '{"op_code": 5, "worker_id": "x"}\n'],
        "Optuna cannot replay it (KeyError: 'trial_id')",
    ),
    "a negative seed": (
        lambda lines, _: set_attr(lines, "seed", -5),
        "trial 0: user attribute 'seed' is -5, expected an integer seed in [0, 2**32-1]",
    ),
    "a seed that is a string": (
        lambda lines, _: set_attr(lines, "seed", "7"),
        "trial 0: user attribute 'seed' is '7', expected an integer seed",
    ),
    "hyperparams that are a list": (
        lambda lines, _: set_attr(lines, "hyperparams", [1, 2]),
        "trial 0: user attribute 'hyperparams' is [1, 2], expected a mapping of hyperparameter names",
    ),
    "a heartbeat that is a string": (
        lambda lines, _: set_attr(lines, "rlbench_heartbeat", "now"),
        "trial 0: system attribute 'rlbench_heartbeat' is 'now', expected a time in seconds",
    ),
    "a CMA-ES state that runs code": (
        cma_state,
        "trial 0: CMA-ES state cma:optimizer cannot be restored safely (it refers to posix.system, which a "
        "CMA-ES state never holds)",
    ),
}


@pytest.mark.parametrize("mode", ["-optimize", "--trial-id"])
@pytest.mark.parametrize("case", list(FORGED))
def test_a_forged_journal_is_one_line_and_exit_2_before_anything_is_written(journal, tmp_path, capsys, case, mode):
    forge, message = FORGED[case]
    marker = tmp_path / "code-ran"
    path = tmp_path / "logs" / "sac" / JOURNAL
    path.parent.mkdir(parents=True)
    path.write_text("".join(forge(journal, marker)))
    before = path.read_bytes()
    flags = ["-optimize", "--n-trials", "1", "--sampler", "cmaes"] if mode == "-optimize" else ["--trial-id", "0"]
    assert main(["-f", str(tmp_path / "logs"), *ARGV, *flags]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1 and message in err, err
    assert str(path) in err and "edited" in err
    assert path.read_bytes() == before and os.listdir(path.parent) == [JOURNAL] and not marker.exists()


@pytest.mark.parametrize("mode", ["-optimize", "--trial-id"])
def test_a_storage_that_is_a_directory_is_one_line_and_exit_2(tmp_path, capsys, mode):
    folder = tmp_path / "studies"
    folder.mkdir()
    flags = ["-optimize", "--n-trials", "1"] if mode == "-optimize" else ["--trial-id", "0"]
    assert main(["-f", str(tmp_path / "logs"), *ARGV, *flags, "--storage", str(folder)]) == 2
    assert capsys.readouterr().err == (
        f"error: --storage {folder}: a directory; a journal storage is a file path (e.g. {folder / 'optuna.log'}), "
        "or give an sqlite:/// or postgresql:// URL\n"
    )
    assert os.listdir(folder) == [] and not (tmp_path / "logs").exists()


def test_a_real_cma_es_state_passes_the_check(tmp_path):
    """What Optuna's CMA-ES sampler stores (its optimizer, pickled) is what the check lets through."""
    url = str(tmp_path / "cma.log")
    sampler = optuna.samplers.CmaEsSampler(seed=0, n_startup_trials=1, warn_independent_sampling=False)
    study = optuna.create_study(storage=make_storage(url), study_name="cma", sampler=sampler, direction="maximize")
    study.optimize(lambda trial: trial.suggest_float("x", -1, 1) + trial.suggest_int("y", 0, 5), n_trials=12)
    assert any(key.startswith("cma:optimizer:") for trial in study.trials for key in trial.system_attrs)
    check_trials(make_storage(url), "cma", url)
    shutil.copy(url, tmp_path / "copy.log")  # and the journal's own checks
    make_storage(str(tmp_path / "copy.log"))


SEED = "UPDATE trial_user_attributes SET value_json = ? WHERE key = 'seed'"
DISTRIBUTION = "UPDATE trial_params SET distribution_json = ?"


@pytest.mark.parametrize(
    "statement,value,message",
    [
        (SEED, "-5", "trial 0: user attribute 'seed' is -5, expected an integer seed"),
        (SEED, "[" * 100_000 + "]" * 100_000, "unreadable (nested too deeply to parse)"),
        (DISTRIBUTION, '{"nme": 1}', "unreadable (KeyError: 'type')"),
    ],
    ids=["seed -5", "JSON 100,000 deep", "a parameter's distribution"],
)
def test_a_forged_sqlite_study_is_one_line_and_exit_2(tmp_path, capsys, statement, value, message):
    """The same checks for an RDB storage, whose attributes and distributions Optuna parses from JSON."""
    url = f"sqlite:///{tmp_path / 'study.db'}"
    study = optuna.create_study(storage=make_storage(url), study_name="forged", direction="maximize")
    distributions = {"tau": optuna.distributions.FloatDistribution(0.001, 0.05)}
    attrs = {"seed": 5, "hyperparams": {"gamma": 0.98}}
    study.add_trial(
        optuna.trial.create_trial(value=0.0, params={"tau": 0.01}, distributions=distributions, user_attrs=attrs)
    )
    with sqlite3.connect(tmp_path / "study.db") as db:
        db.execute(statement, (value,))
    argv = ["-f", str(tmp_path / "logs"), *ARGV, "--trial-id", "0", "--storage", url, "--study-name", "forged"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: study 'forged' in sqlite:///") and err.count("\n") == 1 and message in err, err
    assert not (tmp_path / "logs").exists()


@pytest.mark.parametrize(
    "stored,message",
    [
        ({"gamma": "x"}, "gamma: expected a number, got 'x'"),
        (
            {"bogus_key": 1},
            "unknown hyperparameter 'bogus_key' in the hyperparameters stored with --trial-id 0 (valid:",
        ),
    ],
    ids=["a value of the wrong type", "an unknown key"],
)
def test_a_stored_trial_s_invalid_hyperparameters_are_one_line_naming_the_trial(tmp_path, capsys, stored, message):
    """Issue 32 item 12: the error blamed the hyperparameter file (or named nothing) for the trial's values."""
    url = f"sqlite:///{tmp_path / 'study.db'}"
    study = optuna.create_study(storage=make_storage(url), study_name="forged", direction="maximize")
    distributions = {"tau": optuna.distributions.FloatDistribution(0.001, 0.05)}
    attrs = {"seed": 5, "hyperparams": stored}
    study.add_trial(
        optuna.trial.create_trial(value=0.0, params={"tau": 0.01}, distributions=distributions, user_attrs=attrs)
    )
    argv = ["-f", str(tmp_path / "logs"), *ARGV, "--trial-id", "0", "--storage", url, "--study-name", "forged"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: --trial-id 0: the trial's stored hyperparameters are invalid: "), err
    assert err.count("\n") == 1 and message in err and "sac.yml" not in err, err
    assert not (tmp_path / "logs").exists()
