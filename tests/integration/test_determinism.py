"""Same seed, separate processes, CPU: bit-identical parameters and returns; other seeds differ (I1, I2, I4)."""

import hashlib
import subprocess
import sys
import zipfile

import numpy as np
import pytest

from tests.conftest import REPO_ROOT, TINY_LEARNER

ARGS = ["--env", "Pendulum-v1", "-n", "400", "--eval-freq", "200", "--eval-episodes", "2", "--verbose", "0"]
ARGS += ["-params", *TINY_LEARNER]
# DroQ's preset with its dropout critic (masks from lax.rng_bit_generator), 2 gradient steps per env step.
DROQ_EXTRA = ["gradient_steps:2", "policy_delay:2"]


def start_training(log_folder, algo, seed):
    extra = DROQ_EXTRA if algo == "droq" else []
    return subprocess.Popen(
        [sys.executable, "train.py", "--algo", algo, *ARGS, *extra, "--seed", str(seed), "-f", str(log_folder)],
        cwd=REPO_ROOT,
    )


def finished_run(log_folder, algo, process):
    assert process.wait(timeout=600) == 0
    run_dir = next((log_folder / algo).glob("Pendulum-v1_*"))
    model = hashlib.sha256(zipfile.ZipFile(run_dir / "Pendulum-v1.zip").read("state.msgpack")).hexdigest()
    return model, np.load(run_dir / "evaluations.npz")["results"]


@pytest.mark.parametrize("algo", ["sac", "droq"])
def test_same_seed_is_bit_identical_across_processes_and_other_seeds_differ(tmp_path, algo):
    # Run a first, alone; then b (a's seed) and c (another seed) at the same time: b must end exactly as a,
    # however its neighbour shares the machine. (b and c load what a compiled from the session's cache: one
    # compilation instead of three.)
    model_a, returns_a = finished_run(tmp_path / "a", algo, start_training(tmp_path / "a", algo, 3))
    runs = {name: start_training(tmp_path / name, algo, seed) for name, seed in (("b", 3), ("c", 4))}
    (model_b, returns_b), (model_c, returns_c) = (
        finished_run(tmp_path / name, algo, process) for name, process in runs.items()
    )
    assert model_a == model_b
    np.testing.assert_array_equal(returns_a, returns_b)
    assert model_a != model_c
    assert not np.array_equal(returns_a, returns_c)
