#!/usr/bin/env python3
"""Record a trained agent to an mp4, headless: RL Zoo's record_video, on enjoy.py's loader.

    python scripts/record_video.py --algo sac --env HalfCheetah-v4 -f logs -n 1000 -o videos/cheetah.mp4

Takes enjoy.py's flags (--exp-id, --load-best, --load-checkpoint N, --stochastic, ...) plus -o/--output.
"""

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from rlbench.cli.enjoy import main

if __name__ == "__main__":
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("-o", "--output", default="videos/agent.mp4")
    known, rest = parser.parse_known_args()
    sys.exit(main([*rest, "--no-render", "--record", known.output]))
