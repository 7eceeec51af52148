"""Learning thresholds (marked slow; CI runs them): the learners must actually learn."""

import numpy as np
import pytest

from rlbench.cli.train import main


def final_eval(tmp_path, algo, seed, *extra):
    argv = [
        "--algo",
        algo,
        "--env",
        "Pendulum-v1",
        "-n",
        "10000",
        "--seed",
        str(seed),
        "--eval-freq",
        "10000",
        "--eval-episodes",
        "10",
        "--verbose",
        "0",
        "-f",
        str(tmp_path),
        *extra,
    ]
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


@pytest.mark.slow
@pytest.mark.parametrize("seed", [1, 2])
def test_crossq_solves_pendulum_in_10k_steps(tmp_path, seed):
    # The CrossQ preset with the critic narrowed to [256, 256] to keep CI fast.
    assert (
        final_eval(
            tmp_path, "crossq", seed, "-params", "policy_kwargs:dict(net_arch=dict(pi=[256, 256], qf=[256, 256]))"
        )
        >= -250
    )


@pytest.mark.slow
@pytest.mark.parametrize("seed", [1, 2])
def test_droq_solves_pendulum_in_5k_steps(tmp_path, seed):
    # The DroQ preset (20 gradient steps per env step, policy delay 20, dropout 0.01 + layer norm) and
    # hyperparams/droq.yml's Pendulum-v1 entry, with [64, 64] networks to keep CI fast.
    argv = [
        "--algo",
        "droq",
        "--env",
        "Pendulum-v1",
        "-n",
        "5000",
        "--seed",
        str(seed),
        "--eval-freq",
        "5000",
        "--eval-episodes",
        "10",
        "--verbose",
        "0",
        "-f",
        str(tmp_path),
        "-params",
        "policy_kwargs:dict(net_arch=[64, 64])",
    ]
    assert main(argv) == 0
    (run_dir,) = (tmp_path / "droq").glob("Pendulum-v1_*")
    evaluations = np.load(run_dir / "evaluations.npz")
    assert evaluations["timesteps"][-1] == 5000 and evaluations["results"][-1].mean() >= -250
