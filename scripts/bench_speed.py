#!/usr/bin/env python3
"""Speed benchmark; same as `python -m rlbench.bench speed` (see rlbench/bench/speed.py)."""

import sys

from rlbench.bench.speed import main

if __name__ == "__main__":
    sys.exit(main())
