"""rlbench: fast, correct and resumable continuous-control RL in JAX, driven by an RL Zoo command line."""

import os

# On a GPU, JAX by default grabs 75% of its memory at start; rlbench's footprint is small and known
# (networks plus the replay buffer, checked before training), and several runs often share one GPU.
# Read when JAX creates its GPU client, i.e. at the first computation, after this import. A value the
# user set is kept.
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")

__version__ = "0.1.0"
