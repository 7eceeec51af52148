#!/usr/bin/env python3
"""One env and entry on the host loop and on the device loop, alternated in one invocation (issue 48: Atari on
EnvPool's pools with `--vec-env dummy`, the host loop, and through EnvPool's XLA interface with
`--vec-env envpool-xla`, the device loop):

    python benchmarks/loops_speed.py --algo ppo --env envpool:Breakout-v5 --steps 10240 --rounds 2
    python benchmarks/loops_speed.py --algo dqn --env envpool:Breakout-v5 --steps 4000 \
        -params learning_starts:1000 buffer_size:10000

Each row is one train.py run in this process with the files' entry for the env (RL Zoo's `atari` entry for an
Atari game), evaluations off. Its rate is read from its own progress.csv: env steps between the first and the
last logged row over the seconds between them, so compilation (before the first row) is left out; the device
loop's programs are traced on the run's own pools and compile again in every run. Prints one JSON line per row
and a summary line per loop, with the machine (CPU model and flags).
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import io
import json
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks.entry_speed import cpu_flags  # noqa: E402
from rlbench.bench.speed import machine  # noqa: E402
from rlbench.cli.train import main as train  # noqa: E402

LOOPS = {"dummy": "host", "envpool-xla": "device"}


def logged_rate(progress: Path) -> tuple[float, int]:
    """(env steps per second between the first and the last logged row, the steps between them)."""
    with progress.open() as file:
        rows = [row for row in csv.DictReader(file) if row.get("time/time_elapsed")]
    first, last = rows[0], rows[-1]
    steps = int(float(last["time/total_timesteps"])) - int(float(first["time/total_timesteps"]))
    seconds = float(last["time/time_elapsed"]) - float(first["time/time_elapsed"])
    return steps / seconds, steps


def loop_rate(algo: str, env_id: str, steps: int, vec_env: str, params: list[str]) -> tuple[float, int]:
    with tempfile.TemporaryDirectory() as folder:
        argv = ["--algo", algo, "--env", env_id, "-f", folder, "--eval-freq", "-1", "--seed", "0", "-n", str(steps)]
        argv += ["--vec-env", vec_env, "--log-interval", "1", *(["-params", *params] if params else [])]
        with contextlib.redirect_stdout(io.StringIO()):
            assert train(argv) == 0
        (progress,) = Path(folder).glob(f"{algo}/*/progress.csv")
        return logged_rate(progress)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--algo", required=True)
    parser.add_argument("--env", required=True)
    parser.add_argument("--steps", type=int, required=True)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("-params", nargs="*", default=[])
    args = parser.parse_args()
    print(json.dumps({"machine": machine(), "cpu_flags": cpu_flags()}), flush=True)
    best = dict.fromkeys(LOOPS.values(), 0.0)
    for _ in range(args.rounds):
        for vec_env, loop in LOOPS.items():
            rate, timed = loop_rate(args.algo, args.env, args.steps, vec_env, args.params)
            best[loop] = max(best[loop], rate)
            row = {"algo": args.algo, "env": args.env, "loop": loop, "vec_env": vec_env, "timed_steps": timed}
            print(json.dumps({**row, "env_steps_per_s": round(rate, 1)}), flush=True)
    summary = {"algo": args.algo, "env": args.env, "steps": args.steps, "params": args.params}
    ratio = round(best["device"] / best["host"], 2)
    print(json.dumps({**summary, **{k: round(v, 1) for k, v in best.items()}, "device_over_host": ratio}))


if __name__ == "__main__":
    main()
