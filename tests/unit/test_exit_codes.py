"""The one error -> exit-code mapping every front end uses (rlbench.run.exit_codes): each code and its line."""

import errno
import signal

import pytest

from rlbench.config.literals import LiteralError
from rlbench.errors import ConfigError, DivergenceError
from rlbench.run.exit_codes import EXIT_ABORTED, EXIT_INTERRUPTED, exit_code, run_exit_code
from rlbench.run.signals import StartInterrupted
from rlbench.store.checkpoint import CheckpointError


def failure_with_note() -> DivergenceError:
    error = DivergenceError("seed 3 diverged")
    error.add_note("checkpoint written: logs/sac/P_1/P.zip")
    return error


@pytest.mark.parametrize(
    "error,code,stderr",
    [
        (ConfigError("--seed 5e9 is too large"), 2, "error: --seed 5e9 is too large\n"),
        (LiteralError("-params gamma: not a literal"), 2, "error: -params gamma: not a literal\n"),
        (failure_with_note(), 1, "error: seed 3 diverged\ncheckpoint written: logs/sac/P_1/P.zip\n"),
        # rlbench's own OSError(errno, message) shows its message; a library's keeps errno and file name.
        (
            OSError(errno.ENOSPC, "cannot create a run folder under logs: disk full"),
            1,
            "error: cannot create a run folder under logs: disk full\n",
        ),
        (
            FileNotFoundError(errno.ENOENT, "No such file or directory", "x.zip"),
            1,
            "error: [Errno 2] No such file or directory: 'x.zip'\n",
        ),
        (
            StartInterrupted(signal.SIGTERM),
            128 + 15,
            "stopped by SIGTERM before training started; no run folder left behind\n",
        ),
        (KeyboardInterrupt(), EXIT_ABORTED, "aborted (second Ctrl-C): no checkpoint written for the current step\n"),
    ],
)
def test_each_error_has_its_code_and_one_line(capsys, error, code, stderr):
    assert exit_code(error) == code
    assert capsys.readouterr().err == stderr
    assert exit_code(error, report=False) == code  # W&B runs finish with the same code, silently
    assert capsys.readouterr().err == ""


def test_a_checkpoint_error_is_a_runtime_failure(capsys, tmp_path):
    assert exit_code(CheckpointError(tmp_path / "m.zip", "torn")) == 1
    assert capsys.readouterr().err.startswith("error: ")


def test_an_unexpected_error_shows_its_traceback_and_exits_1(capsys):
    try:
        raise ZeroDivisionError("a bug")
    except ZeroDivisionError as error:
        assert exit_code(error) == 1
    err = capsys.readouterr().err
    assert err.startswith("Traceback") and "ZeroDivisionError: a bug" in err


def test_the_process_code_is_the_worst_seed_code():
    # A failure (1, 2) over an interruption (75) over success (0).
    assert run_exit_code([0, EXIT_INTERRUPTED, 0]) == EXIT_INTERRUPTED
    assert run_exit_code([EXIT_INTERRUPTED, 1, 0]) == 1
    assert run_exit_code([0, 2]) == 2
    assert run_exit_code([0, 0]) == 0
