#!/usr/bin/env python3
"""Speed benchmark; same as `python -m rlbench.bench` (see rlbench/bench.py)."""

import sys

from rlbench.bench import main

if __name__ == "__main__":
    sys.exit(main())
