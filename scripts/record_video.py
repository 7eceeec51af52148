#!/usr/bin/env python3
"""Record a trained agent to an mp4, headless: RL Zoo's record_video, on enjoy.py's loader.

    python scripts/record_video.py --algo sac --env HalfCheetah-v4 -f logs -n 1000 -o videos

Takes enjoy.py's flags (--exp-id, --load-best, --load-checkpoint N, --stochastic, ...) and RL Zoo's
-o/--output-folder (see -h).
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from rlbench.cli.enjoy import main

if __name__ == "__main__":
    sys.exit(main(record_video=True))
