#!/usr/bin/env python3
"""Replay a trained agent: `python enjoy.py --algo sac --env Pendulum-v1 -f logs/` (RL Zoo's flags; see README)."""

import sys

from rlbench.cli.enjoy import main

if __name__ == "__main__":
    sys.exit(main())
