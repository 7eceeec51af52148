#!/usr/bin/env python3
"""Learning curves (PNG) and a final-return table from log folders; same as `python -m rlbench.report.plots`."""

import sys

from rlbench.report.plots import main

if __name__ == "__main__":
    sys.exit(main())
