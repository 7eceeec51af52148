"""Same seed, separate processes, CPU: bit-identical parameters and returns; other seeds differ (I1, I2, I4)."""

import hashlib
import subprocess
import sys
import zipfile

import numpy as np

from tests.conftest import REPO_ROOT

ARGS = ["--algo", "sac", "--env", "Pendulum-v1", "-n", "600", "--eval-freq", "300", "--eval-episodes", "2",
        "--verbose", "0", "-params", "policy_kwargs:dict(net_arch=[32, 32])", "learning_starts:200", "batch_size:64"]


def train_in_new_process(log_folder, seed):
    subprocess.run([sys.executable, "train.py", *ARGS, "--seed", str(seed), "-f", str(log_folder)],
                   cwd=REPO_ROOT, check=True, timeout=600)
    run_dir = next((log_folder / "sac").glob("Pendulum-v1_*"))
    model = hashlib.sha256(zipfile.ZipFile(run_dir / "Pendulum-v1.zip").read("state.msgpack")).hexdigest()
    return model, np.load(run_dir / "evaluations.npz")["results"]


def test_same_seed_is_bit_identical_across_processes_and_other_seeds_differ(tmp_path):
    model_a, returns_a = train_in_new_process(tmp_path / "a", seed=3)
    model_b, returns_b = train_in_new_process(tmp_path / "b", seed=3)
    model_c, returns_c = train_in_new_process(tmp_path / "c", seed=4)
    assert model_a == model_b
    np.testing.assert_array_equal(returns_a, returns_b)
    assert model_a != model_c
    assert not np.array_equal(returns_a, returns_c)
