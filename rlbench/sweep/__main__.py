"""`python -m rlbench.sweep ...`: the command line is rlbench.sweep.command."""

import sys

from rlbench.sweep.command import main

if __name__ == "__main__":
    sys.exit(main())
