"""Exit codes: the one place that turns what stopped a run, or its start, into a process's code and line.

0 success; 1 a runtime failure (an env, an evaluation, a divergence, a corrupt checkpoint, a full disk, an
unreachable Optuna storage); 2 bad input (a ConfigError: found before anything is written, or late); 75
stopped by SIGINT or SIGTERM with a checkpoint written (EX_TEMPFAIL: run again); 130 a second Ctrl-C,
stopped without one; 128 + N a signal N while a run was starting (nothing of it left behind). Every front
end (train.py and -optimize, a sweep's cell, the benchmarks) maps its errors here.
"""

from __future__ import annotations

import sys
import traceback
from collections.abc import Sequence

from rlbench.config.literals import LiteralError
from rlbench.errors import ConfigError, RunFailure
from rlbench.run.signals import StartInterrupted
from rlbench.store.checkpoint import CheckpointError

EXIT_INTERRUPTED = 75  # EX_TEMPFAIL: stopped by a signal, checkpoint written, resumable
EXIT_ABORTED = 130  # a second Ctrl-C: stopped without a checkpoint

# What stops a run and has an exit code: every error, a second Ctrl-C, a signal while starting (the last
# two are BaseExceptions, so that no `except Exception` swallows them). SystemExit is not among them.
STOPPING_ERRORS = (Exception, KeyboardInterrupt, StartInterrupted)

# The expected errors, first match wins: (type, code). Anything else is a bug: its traceback, and 1.
ERROR_CODES: tuple[tuple[type[BaseException], int], ...] = (
    (ConfigError, 2),
    (LiteralError, 2),  # a KEY:VALUE flag's syntax
    (CheckpointError, 1),
    (RunFailure, 1),
    (OSError, 1),
)


def exit_code(error: BaseException, report: bool = True) -> int:
    """The exit code of a run (or its start) stopped by `error`; with `report`, its one line on stderr
    first (a RunFailure's notes, which name the checkpoints written, below it; a traceback for an error
    rlbench did not expect)."""
    if isinstance(error, StartInterrupted):
        line = f"stopped by {error} before training started; no run folder left behind"
        return _report(report, line, 128 + error.signum)
    if isinstance(error, KeyboardInterrupt):
        return _report(report, "aborted (second Ctrl-C): no checkpoint written for the current step", EXIT_ABORTED)
    code = next((code for kind, code in ERROR_CODES if isinstance(error, kind)), None)
    if code is None:
        if report:
            traceback.print_exception(type(error), error, error.__traceback__)
        return 1
    return _report(report, "\n".join([f"error: {error_text(error)}", *getattr(error, "__notes__", [])]), code)


def error_text(error: BaseException) -> str:
    """An error's message. An OSError rlbench raises itself, OSError(errno, message), shows its message
    alone; one from a library keeps its errno and file name."""
    if isinstance(error, OSError) and error.filename is None and error.strerror:
        return error.strerror
    return str(error)


def _report(report: bool, line: str, code: int) -> int:
    if report:
        print(line, file=sys.stderr, flush=True)
    return code


def exit_code_priority(code: int) -> int:
    """The process's exit code from its seeds': a failure (1, 2) over an interruption (75) over success (0)."""
    return {0: 0, EXIT_INTERRUPTED: 1}.get(code, 2)


def run_exit_code(codes: Sequence[int]) -> int:
    return max(codes, key=exit_code_priority)
