"""The keys and wrappers RL Zoo's hyperparameter files name, through the loop and train.py / enjoy.py:
frame_stack, TimeFeatureWrapper, train_freq in episodes, target_update_interval, replay_buffer_kwargs,
optimize_memory_usage, stats_window_size, and the refusals (MultiInputPolicy, values rlbench cannot honour)."""

import csv

import jax
import numpy as np
import pytest
import yaml

import tests.envs  # noqa: F401  (registers the test envs)
from rlbench.algos.common import fused
from rlbench.algos.sac.update import make_learner as make_sac
from rlbench.buffers.uniform import unpack
from rlbench.cli.enjoy import main as enjoy
from rlbench.cli.train import main as train
from rlbench.config.entry import RunConfig, entry_env_wrappers, normalize_entry, split_entry
from rlbench.config.registry import ALGORITHMS
from rlbench.envs.wrappers import trusted_modules
from rlbench.loggers.base import MultiLogger
from rlbench.networks.actor import GSDEConfig
from rlbench.types import EnvSpec
from tests.conftest import tiny_sac_config
from tests.loop_runs import train as run_loop

TIME_FEATURE = "sb3_contrib.common.wrappers.TimeFeatureWrapper"
NO_TRAINING = ["learning_starts:1000", "policy_kwargs:dict(net_arch=[8])"]


def test_replay_buffer_stores_stacked_observations_and_the_true_final_stack():
    """Counting-v0 (obs t, truncated after 7 steps) with its time feature 1 - t/7 and frame_stack 2: every row
    of the buffer by hand, the truncated transition's next_obs ending in the final observation t = 7."""
    wrappers = entry_env_wrappers({"env_wrapper": [TIME_FEATURE], "frame_stack": 2}, trusted_modules(), "test")
    run = RunConfig(env_id="tests.envs:Counting-v0", n_timesteps=10, env_wrappers=wrappers, eval_freq=-1, verbose=0)
    result = run_loop(run, ALGORITHMS["sac"], tiny_sac_config(learning_starts=1000), lambda names: MultiLogger([]))
    rows = result.buffer_state.rows[: int(result.buffer_state.size)]
    data = jax.tree.map(np.asarray, unpack(rows, EnvSpec(obs_dim=4, action_dim=1)))

    def stack(t):  # after t steps of an episode: [frame t-1, frame t], zeros before its start
        return [x for s in (t - 1, t) for x in ([s, 1 - s / 7] if s >= 0 else [0.0, 0.0])]

    steps = [*range(7), *range(3)]  # the step index of each stored transition's obs: a new episode after 7
    np.testing.assert_allclose(data.obs, [stack(t) for t in steps], rtol=1e-6)
    np.testing.assert_allclose(data.next_obs, [stack(t + 1) for t in steps], rtol=1e-6)
    np.testing.assert_allclose(data.next_obs[6], [6, 1 / 7, 7, 0], rtol=1e-6)  # the true final stack
    assert data.terminated.sum() == 0  # truncated, so bootstrapped


@pytest.mark.parametrize(
    "gradient_steps,learning_starts,per_update,trained",
    [
        (-1, 5, 4, {14: 14, 28: 28}),  # the rollout's 14 env steps, in calls of 4: 4 + 4 + 4 + 2
        (-1, 20, 64, {28: 14}),  # the first rollout ends before learning_starts: no training
        (3, 5, 64, {14: 3, 28: 6}),
    ],
)
def test_train_freq_in_episodes_trains_at_the_end_of_every_second_episode(
    monkeypatch, gradient_steps, learning_starts, per_update, trained
):
    """Counting-v0's episodes end every 7 steps; train_freq [2, "episode"] trains at env steps 14 and 28, as
    SB3: gradient_steps, or with -1 as many as the rollout's env steps (warm-up steps included)."""
    monkeypatch.setattr(fused, "VARIABLE_STEPS_PER_UPDATE", per_update)
    cfg = tiny_sac_config(
        train_freq=2, train_freq_unit="episode", gradient_steps=gradient_steps, learning_starts=learning_starts
    )
    run = RunConfig(env_id="tests.envs:Counting-v0", n_timesteps=30, eval_freq=-1, verbose=0)
    done = []
    run_loop(
        run,
        ALGORITHMS["sac"],
        cfg,
        lambda names: MultiLogger([]),
        on_iteration=lambda env_steps, state: done.append(int(state.step)),
    )
    expected, total = [], 0
    for env_steps in range(1, 31):
        total = trained.get(env_steps, total)
        expected.append(total)
    assert done == expected


def test_gsde_resamples_at_each_episodic_rollout_start_and_every_sde_sample_freq_steps_into_it():
    """train_freq [1, "episode"] on Counting-v0 (7-step episodes), the policy acting from step 7: a rollout is
    one episode, so with sde_sample_freq 3 the matrices are drawn 0, 3 and 6 steps into each rollout: at
    steps 7, 10, 13, 14, 17 and 20 (6 draws); training at the ends of episodes 2 and 3 (one step each)."""
    cfg = tiny_sac_config(
        learning_starts=7, train_freq=1, train_freq_unit="episode", gsde=GSDEConfig(n_envs=1, sample_freq=3)
    )
    run = RunConfig(env_id="tests.envs:Counting-v0", n_timesteps=21, eval_freq=-1, verbose=0, seed=3)
    result = run_loop(run, ALGORITHMS["sac"], cfg, lambda names: MultiLogger([]))
    initial = jax.jit(make_sac(cfg, EnvSpec(obs_dim=1, action_dim=1)).init_fn)(jax.random.split(jax.random.key(3))[0])
    key = initial.exploration.key
    for _ in range(6):
        key, _ = jax.random.split(key)
    np.testing.assert_array_equal(jax.random.key_data(result.state.exploration.key), jax.random.key_data(key))
    assert int(result.state.step) == 2


def test_rl_zoo_keys_run_write_back_and_enjoy_uses_the_wrappers(tmp_path, capsys):
    logs = tmp_path / "logs"
    code = train(
        [
            *("-f", str(logs), "--env", "Pendulum-v1", "-n", "600", "--eval-freq", "-1", "--log-interval", "1"),
            *("-params", *NO_TRAINING, "frame_stack:2", f"env_wrapper:{TIME_FEATURE}", "stats_window_size:1"),
            *("target_update_interval:2", "optimize_memory_usage:True"),
            "replay_buffer_kwargs:dict(handle_timeout_termination=True)",
        ]
    )
    out = capsys.readouterr().out
    assert code == 0
    assert out.count("Note: optimize_memory_usage changes nothing in rlbench") == 1
    run_dir = logs / "sac" / "Pendulum-v1_1"
    config = yaml.safe_load((run_dir / "Pendulum-v1" / "config.yml").read_text())
    assert config["frame_stack"] == 2 and config["env_wrapper"] == [{TIME_FEATURE: {}}]
    assert config["stats_window_size"] == 1 and config["target_update_interval"] == 2
    assert "replay_buffer_kwargs" not in config and "optimize_memory_usage" not in config  # they change nothing
    # config.yml is an entry that rebuilds the same run.
    entry = normalize_entry(config, "config.yml")
    run_keys, wrappers, learner_keys = split_entry(entry, "config.yml", trusted_modules())
    assert [w.name for w in wrappers] == [TIME_FEATURE, "frame_stack"] and run_keys["stats_window_size"] == 1
    sac = ALGORITHMS["sac"]
    assert sac.config_to_hyperparams(sac.build_config(learner_keys, 1, "config.yml")).items() <= config.items()
    # stats_window_size 1: each logged ep_rew_mean is the return of the episode that just ended.
    with (run_dir / "progress.csv").open() as stream:
        logged = [float(row["rollout/ep_rew_mean"]) for row in csv.DictReader(stream) if row["rollout/ep_rew_mean"]]
    returns = [float(line.split(",")[0]) for line in (run_dir / "0.monitor.csv").read_text().splitlines()[2:]]
    assert len(returns) == 3 and len(logged) == 3
    np.testing.assert_allclose(logged, returns, rtol=1e-5)
    # enjoy.py builds the env as config.yml says: a policy of 2 x (3 + 1) inputs acts on it.
    assert enjoy(["--env", "Pendulum-v1", "-f", str(logs), "--no-render", "-n", "5", "--verbose", "0"]) == 0


@pytest.mark.parametrize(
    "params,message",
    [
        (["frame_stack:0"], "frame_stack: expected a positive integer"),
        (["replay_buffer_kwargs:dict(device='cpu')"], "replay_buffer_kwargs: 'device' is not supported"),
        (["replay_buffer_kwargs:dict(handle_timeout_termination=False)"], "handle_timeout_termination must be True"),
        (["optimize_memory_usage:'yes'"], "optimize_memory_usage: expected True or False"),
        (["stats_window_size:0"], "stats_window_size: expected a positive integer"),
        (["target_update_interval:0"], "target_update_interval: 0 is out of range"),
        (["policy:MultiInputPolicy"], "policy: 'MultiInputPolicy' is for dict observations"),
        ([f"env_wrapper:{TIME_FEATURE}X"], "module 'sb3_contrib.common.wrappers' is not trusted"),
        (["train_freq:[1, 'epoch']"], "train_freq: expected n, [n, 'step'] or [n, 'episode']"),
        (["train_freq:[1, 'episode']", "n_envs:2"], "counts episodes, which needs n_envs 1"),
        (["train_freq:[1, 'episode']", "--n-seeds", "2"], "train one seed per process"),
    ],
)
def test_bad_values_exit_2_with_one_line_before_any_file(tmp_path, capsys, params, message):
    flags = params[params.index("--n-seeds") :] if "--n-seeds" in params else []
    argv = ["-f", str(tmp_path / "logs"), "-n", "20", *flags, "-params", *NO_TRAINING]
    assert train([*argv, *(p for p in params if p not in flags)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and message in err and "\n" not in err
    assert not (tmp_path / "logs").exists()
