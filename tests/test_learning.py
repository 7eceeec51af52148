"""Learning thresholds (marked slow; CI runs them): the learners must actually learn."""

import numpy as np
import pytest

from rlbench.cli.train import main


def final_eval(tmp_path, algo, seed, *extra):
    argv = ["--algo", algo, "--env", "Pendulum-v1", "-n", "10000", "--seed", str(seed), "--eval-freq", "10000",
            "--eval-episodes", "10", "--verbose", "0", "-f", str(tmp_path), *extra]
    assert main(argv) == 0
    (run_dir,) = (tmp_path / algo).glob("Pendulum-v1_*")
    evaluations = np.load(run_dir / "evaluations.npz")
    assert evaluations["timesteps"][-1] == 10000
    return float(evaluations["results"][-1].mean())


@pytest.mark.slow
@pytest.mark.parametrize("seed", [1, 2])
def test_sac_solves_pendulum_in_10k_steps(tmp_path, seed):
    # hyperparams/sac.yml Pendulum-v1 (learning_rate 1e-3), default networks [256, 256].
    assert final_eval(tmp_path, "sac", seed) >= -250
