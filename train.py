#!/usr/bin/env python3
"""Train an agent: `python train.py --algo sac --env Pendulum-v1` (RL Zoo's flags; see README)."""

import sys

from rlbench.cli.train import main

if __name__ == "__main__":
    sys.exit(main())
