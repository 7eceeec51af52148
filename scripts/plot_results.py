#!/usr/bin/env python3
"""Learning curves (PNG) and a final-return table from log folders; same as `python -m rlbench.plots`."""

import sys

from rlbench.plots import main

if __name__ == "__main__":
    sys.exit(main())
