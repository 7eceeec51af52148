"""rlbench: fast, correct and resumable continuous-control RL in JAX, driven by an RL Zoo command line."""

__version__ = "0.1.0"
