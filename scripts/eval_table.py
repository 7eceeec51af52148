#!/usr/bin/env python3
"""Learning curves as a markdown table: mean +/- std over seeds of each run folder's evaluations.npz.

    python scripts/eval_table.py logs/crossq/HalfCheetah-v4_* --label CrossQ logs/sac/HalfCheetah-v4_* --label SAC
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np


def load(folders: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """timesteps [n_evals] and per-seed mean returns [n_seeds, n_evals], over the evals all runs share."""
    runs = [np.load(Path(f) / "evaluations.npz") for f in folders]
    n = min(len(r["timesteps"]) for r in runs)
    timesteps = runs[0]["timesteps"][:n]
    for r in runs:
        if not np.array_equal(r["timesteps"][:n], timesteps):
            raise SystemExit("runs were evaluated at different timesteps")
    return timesteps, np.array([r["results"][:n].mean(axis=1) for r in runs])


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("items", nargs="+", help="run folders, each group followed by --label NAME")
    args, groups, current = p.parse_args(argv), [], []
    tokens = args.items
    i = 0
    while i < len(tokens):
        if tokens[i] == "--label":
            groups.append((tokens[i + 1], current))
            current, i = [], i + 2
        else:
            current.append(tokens[i])
            i += 1
    if current:
        groups.append(("runs", current))
    curves = {label: load(folders) for label, folders in groups}
    timesteps = next(iter(curves.values()))[0]
    print("| env steps | " + " | ".join(f"{label} (n={len(f)})" for label, f in groups) + " |")
    print("|---" * (len(groups) + 1) + "|")
    for j, t in enumerate(timesteps):
        cells = [f"{returns[:, j].mean():.0f} +/- {returns[:, j].std():.0f}" if j < returns.shape[1] else ""
                 for _, returns in curves.values()]
        print(f"| {t} | " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
