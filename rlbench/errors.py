"""Errors the command line turns into exit codes (0 ok, 1 runtime failure, 2 usage/config, 75 interrupted)."""

import argparse
from typing import NoReturn


class ConfigError(ValueError):
    """Bad user input (flag, hyperparameter, file, env id). Raised before anything is written; exit 2."""


class RunFailure(RuntimeError):
    """Training stopped by a failure; a note names the checkpoint written first. Exit 1."""


class EnvWorkerError(RunFailure):
    """A training or evaluation environment raised, or its subprocess died; the message names its index."""


class EvaluationError(RunFailure):
    """An evaluation failed (its env, or a non-finite return)."""


class DivergenceError(RunFailure):
    """The learner state or its losses became non-finite (NaN or inf)."""


class OneLineParser(argparse.ArgumentParser):
    """argparse's parser, whose errors are one line and exit 2: argparse prints the whole usage first (30
    lines for train.py), burying the error; --help has it. Every command's parser is one (rlbench.cli.flags
    builds train.py's, enjoy.py's, the sweep's and bench's; rlbench.report.plots its own)."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {' '.join(message.split())}; see --help\n")
