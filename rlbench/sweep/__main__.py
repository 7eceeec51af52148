"""`python -m rlbench.sweep ...`: the command line is rlbench.cli.sweep."""

import sys

from rlbench.cli.sweep import main

if __name__ == "__main__":
    sys.exit(main())
