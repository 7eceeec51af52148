"""The shipped hyperparameter files' newer entries: MuJoCo -v5 ids and the Box2D envs (issue 18, item 5)."""

import os
import subprocess
import sys

import gymnasium as gym
import numpy as np
import pytest
import yaml

from rlbench.cli.train import main as train
from rlbench.config.hyperparams import default_file
from tests.conftest import REPO_ROOT


@pytest.mark.parametrize("algo", ["sac", "droq", "crossq", "tqc", "td3", "ddpg"])
def test_every_mujoco_v4_entry_has_a_v5_twin_with_its_values_for_a_registered_env(algo):
    table = yaml.safe_load(default_file(algo).read_text())
    v4 = [env for env in table if env.endswith("-v4")]
    assert v4, algo
    for env in v4:
        twin = env.removesuffix("-v4") + "-v5"
        assert table.get(twin) == table[env], (algo, twin)
        assert twin in gym.registry, twin


@pytest.mark.slow  # 8-9 s each on CI's 2 cores: run with the learning runs, to keep the default run under 6 minutes
@pytest.mark.parametrize("env_id", ["LunarLanderContinuous-v3", "BipedalWalker-v3"])
def test_box2d_envs_train_with_their_shipped_entry(tmp_path, env_id):
    """The shipped SAC entry (its network, batch, buffer) for 300 steps, training from step 250."""
    log = tmp_path / "logs"
    argv = ["--algo", "sac", "--env", env_id, "-n", "300", "--seed", "1", "-f", str(log), "--verbose", "0"]
    argv += ["--eval-freq", "300", "--eval-episodes", "1", "-params", "learning_starts:250"]
    assert train(argv) == 0
    run = log / "sac" / f"{env_id}_1"
    saved = yaml.safe_load((run / env_id / "config.yml").read_text())
    entry = yaml.safe_load(default_file("sac").read_text())[env_id]
    numbers = {key: value for key, value in entry.items() if isinstance(value, int | float) and key != "n_timesteps"}
    assert numbers and {key: saved[key] for key in numbers} == numbers | {"learning_starts": 250}
    assert saved["policy_kwargs"]["net_arch"] == {"pi": [400, 300], "qf": [400, 300]}
    assert "net_arch=[400, 300]" in entry["policy_kwargs"]
    assert np.load(run / "evaluations.npz")["timesteps"].tolist() == [300]


def test_a_box2d_env_without_box2d_exits_2_naming_the_extra(tmp_path):
    stubs = tmp_path / "stubs"
    stubs.mkdir()
    (stubs / "Box2D.py").write_text("raise ImportError(\"No module named 'Box2D'\", name='Box2D')\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(stubs), REPO_ROOT])}
    log = tmp_path / "logs"
    done = subprocess.run(
        [sys.executable, "train.py", "--env", "LunarLanderContinuous-v3", "-n", "300", "-f", str(log)],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().splitlines()[-1] == (
        'error: LunarLanderContinuous-v3 needs Box2D, which is not installed: pip install -e ".[box2d]"'
    )
    assert not log.exists()
