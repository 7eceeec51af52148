"""PPO and A2C (a preset of PPO's learner) on the device loop: the host loop's computation on the same env
(every staged rollout row and the parameters after several updates), Discrete and Box actions, seeds vmapped
as their single runs, and a checkpoint taken mid-rollout that the device loop continues bit for bit."""

import jax
import numpy as np
import pytest

from rlbench.cli.train import main
from rlbench.config.entry import RunConfig
from rlbench.config.registry import ALGORITHMS
from rlbench.loop.device.runner import train_seeds_on_device
from rlbench.loop.run_state import SeedOutput
from rlbench.store.checkpoint import read_checkpoint
from tests.conftest import ppo_config
from tests.integration.test_device_loop import NO_LOG, state_hash
from tests.loop_runs import train
from tests.variants import slow_variant

pytest.importorskip("gymnax")

PPO = ALGORITHMS["ppo"]


CASES = {
    # CartPole: Discrete actions, terminations every few dozen steps under a random policy.
    "cartpole": ("gymnax:CartPole-v1", {}, {}),
    "a2c-cartpole": ("gymnax:CartPole-v1", {}, {}),
    # Pendulum (Box, clipped to the bounds for the env, the sample kept), 44-step episodes: truncations, the
    # second one at the last staged step; gSDE's matrices redrawn every 4 vector steps.
    "pendulum-gsde": ("gymnax:Pendulum-v1", {"max_steps_in_episode": 44}, {"use_sde": True, "sde_sample_freq": 4}),
}


@pytest.mark.parametrize("case", ["cartpole", *(slow_variant(case) for case in sorted(CASES) if case != "cartpole")])
def test_ppo_on_the_device_loop_computes_what_the_host_loop_computes(case):
    """The same PPO and seed: the host loop on the env wrapped for gymnasium, the device loop on it unwrapped.
    Five updates (16 vector steps of 2 envs each) and a rollout half staged at the end: equal staged rows
    (obs, sampled action, reward, final obs, terminated, truncated), equal parameters and episodes."""
    env_id, env_kwargs, overrides = CASES[case]
    algo = "a2c" if case.startswith("a2c") else "ppo"
    cfg = ppo_config(algo, **overrides)
    run = RunConfig(env_id=env_id, n_timesteps=5 * 32 + 16, n_envs=2, env_kwargs=env_kwargs, seed=4, eval_freq=-1)
    on_host = train(run, ALGORITHMS[algo], cfg, NO_LOG)
    on_device = train_seeds_on_device(run, ALGORITHMS[algo], cfg, [SeedOutput(NO_LOG)])
    assert on_host.host.pending.count == on_device.host.pending.count == 16
    host_rows, device_rows = on_host.host.pending, on_device.host.pending
    for name in ("obs", "action", "reward", "next_obs", "terminated", "truncated"):
        np.testing.assert_allclose(
            getattr(device_rows, name)[:, :16], getattr(host_rows, name)[:, :16], rtol=1e-4, atol=1e-5, err_msg=name
        )
    assert int(on_device.state.step) == int(on_host.state.step) > 0
    for host_leaf, device_leaf in zip(
        jax.tree.leaves(on_host.state.policy.params), jax.tree.leaves(on_device.state.policy.params), strict=True
    ):
        np.testing.assert_allclose(np.asarray(device_leaf), np.asarray(host_leaf), rtol=1e-3, atol=1e-5)
    host_episodes, device_episodes = on_host.host.seeds[0].episodes, on_device.host.seeds[0].episodes
    assert device_episodes.finished_lengths == host_episodes.finished_lengths
    assert len(host_episodes.finished_lengths) >= 4
    if case == "pendulum-gsde":  # a truncation in the staged rows, and samples beyond the env's bounds
        assert host_episodes.finished_lengths == [44] * 4
        np.testing.assert_array_equal(host_rows.truncated[0, :16], [0] * 14 + [1, 1])
        assert np.abs(host_rows.action[0, :16]).max() > 1.0
    np.testing.assert_allclose(device_episodes.finished_returns, host_episodes.finished_returns, rtol=1e-4)


def test_vmapped_ppo_seeds_on_the_device_loop_are_their_single_runs():
    cfg = ppo_config()
    run = RunConfig(env_id="gymnax:CartPole-v1", n_timesteps=96, n_envs=2, seed=8, eval_freq=-1)
    together = train_seeds_on_device(run, PPO, cfg, [SeedOutput(NO_LOG)] * 2)
    for index in range(2):
        alone = train_seeds_on_device(RunConfig(**{**run.__dict__, "seed": 8 + index}), PPO, cfg, [SeedOutput(NO_LOG)])
        for both, one in zip(
            jax.tree.leaves(together.state.policy.params), jax.tree.leaves(alone.state.policy.params), strict=True
        ):
            np.testing.assert_allclose(np.asarray(both)[index], np.asarray(one), rtol=1e-4, atol=1e-6)
        assert together.host.seeds[index].episodes.finished_lengths == alone.host.seeds[0].episodes.finished_lengths


DEVICE_PPO = [
    "--algo", "ppo", "--env", "gymnax:CartPole-v1", "--seed", "2", "--verbose", "0", "--eval-freq", "96",
    "--eval-episodes", "2", "-params", "n_steps:16", "batch_size:8", "n_epochs:2", "n_envs:2",
    "policy_kwargs:dict(net_arch=dict(pi=[16], vf=[16]))",
]  # fmt: skip


def test_a_checkpoint_mid_rollout_on_the_device_loop_resumes_bit_identically(tmp_path):
    """A checkpoint at 120 env steps (60 vector steps: 12 into the fourth rollout of 16) holds the staged part;
    -i from it ends bit-identical, evaluations included."""
    assert main([*DEVICE_PPO, "-n", "256", "--save-freq", "120", "-f", str(tmp_path)]) == 0
    first = tmp_path / "ppo" / "gymnax_CartPole-v1_1"
    assert read_checkpoint(first / "rl_model_120_steps.zip").manifest.host.pending_count == 24  # 12 steps x 2 envs
    resume = [
        "--algo", "ppo", "--env", "gymnax:CartPole-v1", "-i", str(first / "rl_model_120_steps.zip"),
        "-f", str(tmp_path), "--eval-freq", "96", "--eval-episodes", "2", "--verbose", "0",
    ]  # fmt: skip
    assert main(resume) == 0
    second = tmp_path / "ppo" / "gymnax_CartPole-v1_2"
    assert state_hash(first / "gymnax_CartPole-v1.zip") == state_hash(second / "gymnax_CartPole-v1.zip")
    original, continued = np.load(first / "evaluations.npz"), np.load(second / "evaluations.npz")
    np.testing.assert_array_equal(continued["results"], original["results"])
