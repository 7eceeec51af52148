"""gSDE in the training loop: resamples on SB3's schedule, bit-exact resume mid-rollout (the matrices and
their key are in the checkpoint), and enjoy.py with a gSDE policy."""

import hashlib
import zipfile

import jax
import numpy as np

from rlbench.algos.sac.update import make_learner as make_sac
from rlbench.cli.enjoy import main as enjoy
from rlbench.cli.train import main as train_main
from rlbench.config.entry import RunConfig
from rlbench.config.registry import ALGORITHMS
from rlbench.networks.actor import GSDEConfig
from rlbench.types import EnvSpec
from tests.conftest import tiny_sac_config
from tests.integration.test_env_semantics import NO_LOG
from tests.loop_runs import train


def test_the_training_loop_resamples_on_sb3s_schedule():
    """8 uniform warm-up steps, then rollouts of train_freq 4 with sde_sample_freq 2: resamples at steps 8
    and 10 (the first rollout), then one after each of the 4 updates (steps 12, 16, 20, 24) and one two
    steps into each later rollout (14, 18, 22): 9 draws. Each draw advances the exploration key once."""
    cfg = tiny_sac_config(learning_starts=8, train_freq=4, gradient_steps=1, gsde=GSDEConfig(n_envs=1, sample_freq=2))
    run = RunConfig(env_id="Pendulum-v1", n_timesteps=24, eval_freq=-1, verbose=0, seed=3)
    result = train(run, ALGORITHMS["sac"], cfg, NO_LOG)
    learner = make_sac(cfg, EnvSpec(obs_dim=3, action_dim=1))
    initial = jax.jit(learner.init_fn)(jax.random.split(jax.random.key(3))[0])
    key = initial.exploration.key
    for _ in range(9):
        key, _ = jax.random.split(key)
    np.testing.assert_array_equal(jax.random.key_data(result.state.exploration.key), jax.random.key_data(key))
    assert int(result.state.step) == 4  # the four updates


def state_hash(path):
    return hashlib.sha256(zipfile.ZipFile(path).read("state.msgpack")).hexdigest()


def test_gsde_resumes_bit_identically_mid_rollout_and_enjoy_plays_it(tmp_path, capsys):
    logs = tmp_path / "logs"
    argv = ["-f", str(logs), "--algo", "sac", "--env", "Pendulum-v1", "--verbose", "0", "--seed", "2"]
    argv += ["--eval-freq", "202", "--eval-episodes", "1", "-params", "use_sde:True", "sde_sample_freq:2"]
    argv += ["train_freq:4", "gradient_steps:4", "learning_starts:100", "batch_size:32"]
    argv += ["policy_kwargs:dict(net_arch=[16], log_std_init=-1, use_expln=True)"]
    # A checkpoint at 202 env steps: two steps into a rollout of 4, with its matrices drawn at 200 and 202.
    assert train_main([*argv, "-n", "404", "--save-freq", "202", "--save-replay-buffer"]) == 0
    first = logs / "sac" / "Pendulum-v1_1"
    resume = ["-f", str(logs), "--algo", "sac", "--env", "Pendulum-v1", "--verbose", "0"]
    resume += ["--eval-freq", "202", "--eval-episodes", "1", "-i", str(first / "rl_model_202_steps.zip")]
    assert train_main(resume) == 0
    second = logs / "sac" / "Pendulum-v1_2"
    assert state_hash(first / "Pendulum-v1.zip") == state_hash(second / "Pendulum-v1.zip")
    np.testing.assert_array_equal(
        np.load(first / "evaluations.npz")["results"], np.load(second / "evaluations.npz")["results"]
    )
    capsys.readouterr()
    for extra in ([], ["--stochastic", "--n-envs", "2"]):  # the mode; fresh gSDE noise for 2 envs (trained with 1)
        code = enjoy(
            [
                "--algo",
                "sac",
                "--env",
                "Pendulum-v1",
                "-f",
                str(logs),
                "--exp-id",
                "1",
                "--no-render",
                "-n",
                "200",
                *extra,
            ]
        )
        assert code == 0 and "Mean reward: " in capsys.readouterr().out
