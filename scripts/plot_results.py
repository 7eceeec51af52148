#!/usr/bin/env python3
"""Learning curves (PNG), a final-return table and rliable's comparison of log folders (`-l` labels them);
the same as `python -m rlbench.report.plots`."""

import sys

from rlbench.report.plots import main

if __name__ == "__main__":
    sys.exit(main())
