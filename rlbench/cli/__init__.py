"""Command-line entry points (the only modules that read argv)."""
