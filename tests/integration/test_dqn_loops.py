"""DQN and QR-DQN in both loops: the device loop computes what the host loop computes on gymnax's CartPole-v1,
a checkpoint mid-run resumes bit for bit (the epsilon schedule's and the target's clocks included), SB3's
metric keys, enjoy.py, and the action-space refusals both ways."""

import csv
import re

import jax
import numpy as np
import pytest

from rlbench.cli.enjoy import main as enjoy
from rlbench.cli.train import main
from rlbench.config.entry import RunConfig
from rlbench.config.registry import ALGORITHMS
from rlbench.loop.device.runner import train_seeds_on_device
from rlbench.loop.run_state import SeedOutput
from rlbench.store.checkpoint import read_checkpoint
from tests.integration.test_device_loop import NO_LOG, state_hash
from tests.loop_runs import train

# Small and fast, with every clock in play inside a few hundred steps: the warm-up ends at 64 env steps, epsilon
# falls over the first half, the target is copied every 8 env steps, and 2 gradient steps follow every 4 vector steps.
TINY = {
    "learning_starts": 64,
    "batch_size": 16,
    "buffer_size": 1000,
    "train_freq": 4,
    "gradient_steps": 2,
    "target_update_interval": 8,
    "exploration_fraction": 0.5,
    "learning_rate": "lin_1e-3",
    "policy_kwargs": {"net_arch": [16, 16]},
}
TINY_PARAMS = [
    "learning_starts:64", "batch_size:16", "buffer_size:1000", "train_freq:4", "gradient_steps:2",
    "target_update_interval:8", "exploration_fraction:0.5", "learning_rate:lin_1e-3",
    "policy_kwargs:dict(net_arch=[16, 16])",
]  # fmt: skip


def config(algo: str, **overrides):
    keys = {**TINY, **overrides}
    if algo == "qrdqn":
        keys["policy_kwargs"] = {**keys["policy_kwargs"], "n_quantiles": 7}
    return ALGORITHMS[algo].build_config(keys, 2, "test")


@pytest.mark.parametrize("algo", ["dqn", "qrdqn"])
def test_dqn_on_the_device_loop_computes_what_the_host_loop_computes(algo):
    """The same learner and seed for 300 env steps of 2 envs: the host loop on gymnax's CartPole wrapped for
    gymnasium, the device loop on it unwrapped: equal parameters, target, clocks, buffer and episodes."""
    pytest.importorskip("gymnax")
    run = RunConfig(env_id="gymnax:CartPole-v1", n_timesteps=304, n_envs=2, seed=3, eval_freq=-1)
    cfg = config(algo)
    on_host = train(run, ALGORITHMS[algo], cfg, NO_LOG)
    on_device = train_seeds_on_device(run, ALGORITHMS[algo], cfg, [SeedOutput(NO_LOG)])
    host, device = on_host.state, on_device.state
    # Vector steps acted: the host loop's last iteration (at step 152) also acted for the step after it.
    assert int(device.exploration) == 152 and int(host.exploration) == 153
    assert int(device.step) == int(host.step) == (152 - 32) // 4 * 2  # training from the 33rd vector step
    assert int(device.target_updates) == int(host.target_updates) == 152 // 4
    for host_leaf, device_leaf in zip(jax.tree.leaves(host.q), jax.tree.leaves(device.q), strict=True):
        np.testing.assert_allclose(np.asarray(device_leaf), np.asarray(host_leaf), rtol=1e-4, atol=1e-5)
    host_rows = np.asarray(on_host.buffer_state.rows)
    np.testing.assert_allclose(np.asarray(on_device.buffer_state.rows), host_rows, rtol=1e-5, atol=1e-6)
    host_episodes, device_episodes = on_host.host.seeds[0].episodes, on_device.host.seeds[0].episodes
    assert device_episodes.finished_lengths == host_episodes.finished_lengths
    assert len(host_episodes.finished_lengths) >= 8


TRAIN = ["--algo", "dqn", "--env", "CartPole-v1", "--seed", "5", "--verbose", "0", "-params", *TINY_PARAMS, "n_envs:2"]


def test_a_checkpoint_mid_run_resumes_bit_identically(tmp_path):
    """A checkpoint at 250 env steps (125 vector steps: mid-schedule, one step past a training iteration, with
    the target's next update pending); -i from it ends where the run that never stopped ends, evaluations too."""
    argv = [*TRAIN, "-n", "600", "--eval-freq", "200", "--eval-episodes", "2", "-f", str(tmp_path)]
    assert main([*argv, "--save-freq", "250", "--save-replay-buffer"]) == 0
    first = tmp_path / "dqn" / "CartPole-v1_1"
    checkpoint = first / "rl_model_250_steps.zip"
    resume = ["--algo", "dqn", "--env", "CartPole-v1", "-i", str(checkpoint), "-f", str(tmp_path), "--verbose", "0"]
    assert main([*resume, "--eval-freq", "200", "--eval-episodes", "2"]) == 0
    second = tmp_path / "dqn" / "CartPole-v1_2"
    assert state_hash(first / "CartPole-v1.zip") == state_hash(second / "CartPole-v1.zip")
    original, continued = np.load(first / "evaluations.npz"), np.load(second / "evaluations.npz")
    np.testing.assert_array_equal(continued["results"], original["results"])
    assert read_checkpoint(first / "CartPole-v1.zip").manifest.counters.env_steps == 600


@pytest.fixture(scope="module")
def dqn_logs(tmp_path_factory):
    folder = tmp_path_factory.mktemp("logs")
    assert main([*TRAIN, "-n", "400", "--eval-freq", "-1", "-f", str(folder)]) == 0
    return folder


def test_progress_has_sb3s_dqn_keys(dqn_logs):
    with (dqn_logs / "dqn" / "CartPole-v1_1" / "progress.csv").open() as f:
        rows = list(csv.DictReader(f))
    keys = set(rows[0])
    assert {"rollout/exploration_rate", "train/loss", "train/learning_rate", "train/n_updates"} <= keys
    rates = [float(row["rollout/exploration_rate"]) for row in rows if row["rollout/exploration_rate"]]
    assert rates == sorted(rates, reverse=True) and rates[-1] == pytest.approx(
        0.04
    )  # the schedule's fall to dqn.yml's CartPole value


def test_enjoy_plays_a_dqn_model_greedy_and_stochastic(dqn_logs, capsys):
    for extra in ([], ["--stochastic"]):
        argv = ["--algo", "dqn", "--env", "CartPole-v1", "-f", str(dqn_logs), "--no-render", "-n", "60", *extra]
        assert enjoy(argv) == 0


@pytest.mark.parametrize(
    "algo,env_id,message",
    [
        ("dqn", "Pendulum-v1", r"has a Box action space, and --algo dqn acts in Discrete spaces only; algorithms for "
         r"Box actions: sac, droq, crossq, tqc, td3, ddpg, ppo, a2c"),
        ("sac", "CartPole-v1", r"has a Discrete action space, and --algo sac acts in Box spaces only; algorithms for "
         r"Discrete actions: ppo, a2c, dqn, qrdqn"),
    ],
)  # fmt: skip
def test_an_algorithm_refuses_an_action_space_it_cannot_act_in(tmp_path, capsys, algo, env_id, message):
    assert main(["--algo", algo, "--env", env_id, "-n", "100", "-f", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and re.search(message, err), err
    assert not (tmp_path / algo).exists()
