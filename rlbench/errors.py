"""Errors the command line turns into exit codes (0 ok, 1 runtime failure, 2 usage/config, 75 interrupted)."""


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
