"""Metric sinks. Named `loggers` so it never shadows the standard library's `logging`."""
