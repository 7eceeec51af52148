"""TQC and CrossQ + TQC through train.py and enjoy.py: config.yml in RL Zoo's format, bit-exact
resume from a checkpoint, and a policy that enjoy.py rebuilds from the checkpoint alone."""

import hashlib
import zipfile

import numpy as np
import yaml

from rlbench.cli.enjoy import main as enjoy
from rlbench.cli.train import main as train

TQC_TINY = [
    "--algo",
    "tqc",
    "--env",
    "Pendulum-v1",
    "--seed",
    "3",
    "--verbose",
    "0",
    "--eval-freq",
    "200",
    "--eval-episodes",
    "1",
    "-params",
    "policy_kwargs:dict(net_arch=[16], n_quantiles=5)",
    "top_quantiles_to_drop_per_net:1",
    "learning_starts:100",
    "batch_size:32",
]


def state_hash(path):
    return hashlib.sha256(zipfile.ZipFile(path).read("state.msgpack")).hexdigest()


def test_tqc_trains_resumes_bit_identically_and_enjoy_plays_it(tmp_path, capsys):
    logs = tmp_path / "logs"
    assert train(["-f", str(logs), *TQC_TINY, "-n", "400", "--save-freq", "200", "--save-replay-buffer"]) == 0
    first = logs / "tqc" / "Pendulum-v1_1"
    config = yaml.safe_load((first / "Pendulum-v1" / "config.yml").read_text())
    assert config["top_quantiles_to_drop_per_net"] == 1 and config["policy_kwargs"]["n_quantiles"] == 5
    assert config["tau"] == 0.005 and "batch_norm" not in config["policy_kwargs"]
    resume = ["-f", str(logs), "--algo", "tqc", "--env", "Pendulum-v1", "-i", str(first / "rl_model_200_steps.zip")]
    assert train([*resume, "--verbose", "0", "--eval-freq", "200", "--eval-episodes", "1"]) == 0
    second = logs / "tqc" / "Pendulum-v1_2"
    assert state_hash(first / "Pendulum-v1.zip") == state_hash(second / "Pendulum-v1.zip")
    for name in ("results", "timesteps"):
        np.testing.assert_array_equal(
            np.load(first / "evaluations.npz")[name], np.load(second / "evaluations.npz")[name]
        )
    capsys.readouterr()
    code = enjoy(
        ["--algo", "tqc", "--env", "Pendulum-v1", "-f", str(logs), "--exp-id", "1", "--no-render", "-n", "200"]
    )
    out = capsys.readouterr().out
    assert code == 0 and f"Loaded {first / 'Pendulum-v1.zip'}" in out and "1 Episodes\nMean reward: " in out


def test_crossq_with_quantile_critics_trains_from_the_command_line(tmp_path):
    logs = tmp_path / "logs"
    argv = ["-f", str(logs), "--algo", "crossq", "--env", "Pendulum-v1", "-n", "300", "--verbose", "0"]
    argv += ["--eval-freq", "300", "--eval-episodes", "1", "-params", "learning_starts:100", "batch_size:32"]
    argv += ["policy_kwargs:dict(net_arch=dict(pi=[16], qf=[32]), n_quantiles=5)", "top_quantiles_to_drop_per_net:1"]
    assert train(argv) == 0
    run = logs / "crossq" / "Pendulum-v1_1"
    config = yaml.safe_load((run / "Pendulum-v1" / "config.yml").read_text())
    assert config["policy_kwargs"]["n_quantiles"] == 5 and config["policy_kwargs"]["batch_norm"]
    assert "tau" not in config
    results = np.load(run / "evaluations.npz")["results"]
    assert results.shape == (1, 1) and np.isfinite(results).all()
