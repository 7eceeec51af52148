"""Run resolution below the command line: a RunRequest built as data resolves without argparse."""

import pytest

from rlbench.cli.train import build_parser, request_from_args
from rlbench.config.entry import RunConfig
from rlbench.errors import ConfigError
from rlbench.run.experiment import RunRequest, resolve

TINY = ("learning_starts:100", "batch_size:8", "buffer_size:1000", "policy_kwargs:dict(net_arch=[16])")


def test_resolve_takes_a_request_built_as_data(tmp_path):
    request = RunRequest(
        algo="sac",
        env="Pendulum-v1",
        params=(*TINY, "learning_rate:1e-3"),
        env_kwargs=("g:9.5",),
        n_timesteps=300,
        seed=7,
        eval_freq=100,
        verbose=0,
        device="cpu",
        log_folder=str(tmp_path / "logs"),
    )
    exp = resolve(request)
    assert exp.algo.name == "sac" and exp.resume is None
    assert exp.run == RunConfig(
        env_id="Pendulum-v1",
        n_timesteps=300,
        n_envs=1,
        env_kwargs={"g": 9.5},
        seed=7,
        eval_env_kwargs={"g": 9.5},
        eval_freq=100,
        log_interval=4,
        verbose=0,
    )
    resolved = exp.hyperparams
    assert (resolved["n_timesteps"], resolved["env_kwargs"], resolved["policy"]) == (300, {"g": 9.5}, "MlpPolicy")
    assert (resolved["learning_starts"], resolved["batch_size"], resolved["buffer_size"]) == (100, 8, 1000)
    assert resolved["learning_rate"] == 1e-3
    assert resolved["policy_kwargs"]["net_arch"] == {"pi": [16], "qf": [16]}
    assert exp.spaces["observation"]["shape"] == [3] and exp.spaces["action"] == {
        "shape": [1],
        "dtype": "float32",
        "low": [-2.0],
        "high": [2.0],
    }
    assert exp.learner_config.batch_size == 8 and exp.learner_config.buffer_size == 1000
    assert not (tmp_path / "logs").exists()  # resolution writes nothing


def test_the_command_line_defaults_are_the_request_defaults():
    assert request_from_args(build_parser().parse_args([])) == RunRequest()


def test_n_seeds_is_carried_from_the_command_line():
    assert request_from_args(build_parser().parse_args(["--n-seeds", "4"])).n_seeds == 4


@pytest.mark.parametrize("n_seeds", [0, -3])
def test_n_seeds_must_be_positive(tmp_path, n_seeds):
    request = RunRequest(params=TINY, n_timesteps=300, n_seeds=n_seeds, device="cpu", log_folder=str(tmp_path))
    with pytest.raises(ConfigError, match=f"^--n-seeds: expected a positive integer, got {n_seeds}$"):
        resolve(request)
