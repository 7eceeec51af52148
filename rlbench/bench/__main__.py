"""`python -m rlbench.bench speed|returns ...` (`speed` is the default when no subcommand is given)."""

from __future__ import annotations

import sys
from collections.abc import Callable

COMMANDS = ("speed", "returns")


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    command = argv.pop(0) if argv and argv[0] in COMMANDS else "speed"
    run: Callable[[list[str]], int]  # each subcommand's main(argv)
    if command == "returns":
        from rlbench.bench.returns import main as run
    else:
        from rlbench.bench.speed import main as run
    return run(argv)


if __name__ == "__main__":
    sys.exit(main())
