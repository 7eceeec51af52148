"""Errors the command line turns into exit codes (0 ok, 1 runtime failure, 2 usage/config, 75 interrupted)."""


class ConfigError(ValueError):
    """Bad user input (flag, hyperparameter, file, env id). Raised before anything is written; exit 2."""


class EnvWorkerError(RuntimeError):
    """A subprocess environment raised or died; the message names the worker index."""
