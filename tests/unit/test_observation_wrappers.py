"""RL Zoo's frame_stack and SB3-contrib's TimeFeatureWrapper (rlbench/envs/observations.py), by hand values."""

import gymnasium as gym
import numpy as np
import pytest

import tests.envs  # noqa: F401  (registers the test envs)
from rlbench.config.entry import entry_env_wrappers, normalize_entry, split_entry, wrappers_to_entry
from rlbench.envs.make import final_observations, make_single_env, make_vector_env
from rlbench.envs.observations import FrameStack, TimeFeatureWrapper
from rlbench.envs.wrappers import trusted_modules
from rlbench.errors import ConfigError

TIME_FEATURE = "sb3_contrib.common.wrappers.TimeFeatureWrapper"


def counting_obs(t, limit=7):
    """Counting-v0's observation after t steps (the step index), with its time feature 1 - t / 7."""
    return [float(t), 1.0 - t / limit]


def test_time_feature_by_hand():
    # Counting-v0 has a 7-step time limit: the feature is 1 - t / 7 after t steps.
    env = TimeFeatureWrapper(gym.make("tests.envs:Counting-v0"))
    assert env.max_steps == 7
    np.testing.assert_array_equal(env.observation_space.low, [-np.inf, 0.0])
    np.testing.assert_array_equal(env.observation_space.high, [np.inf, 1.0])
    obs, _ = env.reset(seed=0)
    np.testing.assert_allclose(obs, counting_obs(0))
    for t in range(1, 8):
        obs, *_, truncated, _ = env.step(np.zeros(1, np.float32))
        np.testing.assert_allclose(obs, counting_obs(t), rtol=1e-6)
    assert truncated and obs[1] == 0.0
    assert env.reset()[0][1] == 1.0  # a new episode starts with all its time left
    assert obs.dtype == np.float32


def test_time_feature_limit_from_a_time_limit_wrapper_else_max_steps():
    unlimited = gym.make("tests.envs:TerminateAt8-v0")  # no time limit: SB3-contrib's default 1000, or max_steps
    assert TimeFeatureWrapper(unlimited).max_steps == 1000
    env = TimeFeatureWrapper(unlimited, max_steps=4)
    env.reset(seed=0)
    np.testing.assert_allclose([env.step(np.zeros(1))[0][1] for _ in range(3)], [0.75, 0.5, 0.25])
    limited = TimeFeatureWrapper(gym.wrappers.TimeLimit(gym.make("tests.envs:TerminateAt8-v0"), 20), max_steps=4)
    assert limited.max_steps == 20  # the time limit wins over the argument, as in SB3-contrib
    test_mode = TimeFeatureWrapper(gym.make("tests.envs:Counting-v0"), test_mode=True)
    test_mode.reset(seed=0)
    assert [test_mode.step(np.zeros(1))[0][1] for _ in range(3)] == [1.0, 1.0, 1.0]


def test_frame_stack_by_hand_across_a_truncation_in_the_vector_env():
    """VecFrameStack's observations: zeros then the first observation after a reset, the oldest first; the
    step that truncates returns the reset stack and gives the stack ending in the true final observation as
    final_obs (what the replay buffer stores as next_obs)."""
    wrappers = entry_env_wrappers({"env_wrapper": [TIME_FEATURE], "frame_stack": 3}, trusted_modules(), "test")
    env = make_vector_env("tests.envs:Counting-v0", 1, "dummy", {}, wrappers)
    assert env.single_observation_space.shape == (6,)
    obs, _ = env.reset(seed=0)
    zeros = [0.0, 0.0]
    np.testing.assert_allclose(obs[0], zeros + zeros + counting_obs(0))
    for t in range(1, 8):
        next_obs, _, terminated, truncated, infos = env.step(np.zeros((1, 1), np.float32))
        real_next_obs = final_observations(next_obs, infos, terminated | truncated)
        expected = [x for s in (t - 2, t - 1, t) for x in (counting_obs(s) if s >= 0 else zeros)]
        np.testing.assert_allclose(real_next_obs[0], expected, rtol=1e-6)
    assert truncated[0] and not terminated[0]
    np.testing.assert_allclose(real_next_obs[0], counting_obs(5) + counting_obs(6) + counting_obs(7), rtol=1e-6)
    np.testing.assert_allclose(next_obs[0], zeros + zeros + counting_obs(0))  # the next episode's first stack
    next_obs, *_ = env.step(np.zeros((1, 1), np.float32))
    np.testing.assert_allclose(next_obs[0], zeros + counting_obs(0) + counting_obs(1), rtol=1e-6)
    env.close()


def test_frame_stack_concatenates_on_the_last_axis_with_the_bounds_of_each_frame():
    env = FrameStack(gym.make("Pendulum-v1"), n_stack=2)
    np.testing.assert_array_equal(env.observation_space.high, [1.0, 1.0, 8.0, 1.0, 1.0, 8.0])
    assert env.observation_space.dtype == np.float32
    first, _ = env.reset(seed=0)
    second, *_ = env.step(np.zeros(1, np.float32))
    np.testing.assert_array_equal(first[:3], 0.0)
    np.testing.assert_array_equal(second[:3], first[3:])
    stacked = make_single_env("Pendulum-v1", {}, entry_env_wrappers({"frame_stack": 4}, (), "test"))
    assert stacked.observation_space.shape == (12,)


def test_wrappers_write_back_in_rl_zoos_spelling():
    entry = {"env_wrapper": [{TIME_FEATURE: {"max_steps": 500}}], "frame_stack": 2}
    wrappers = entry_env_wrappers(entry, trusted_modules(), "test")
    assert [w.wrapper_class for w in wrappers] == [TimeFeatureWrapper, FrameStack]
    assert wrappers_to_entry(wrappers) == entry  # config.yml keeps the names the file used
    _, split, learner_keys = split_entry(entry | {"gamma": 0.9}, "test", trusted_modules())
    assert split == wrappers and learner_keys == {"gamma": 0.9}
    assert wrappers_to_entry(()) == {} and entry_env_wrappers({"frame_stack": None}, (), "t") == ()


@pytest.mark.parametrize("value", [0, -1, 2.0, True, "4", [4], 1001])
def test_bad_frame_stack_is_refused_with_its_valid_values(value):
    with pytest.raises(ConfigError, match=r"frame_stack: expected a positive integer up to 1000 .* or None, got"):
        split_entry({"frame_stack": value}, "test", ())


@pytest.mark.parametrize("kwargs", [{"max_steps": 0}, {"max_steps": 2.5}, {"test_mode": "yes"}])
def test_bad_time_feature_arguments_are_refused(kwargs):
    with pytest.raises(ValueError, match=r"TimeFeatureWrapper: (max_steps|test_mode) must be"):
        TimeFeatureWrapper(gym.make("tests.envs:Counting-v0"), **kwargs)


def test_sb3_contrib_is_never_imported_for_its_time_feature_wrapper():
    import sys

    wrappers = entry_env_wrappers(normalize_entry({"env_wrapper": TIME_FEATURE}, "t"), trusted_modules(), "t")
    assert wrappers[0].name == TIME_FEATURE and wrappers[0].wrapper_class is TimeFeatureWrapper
    assert "sb3_contrib" not in sys.modules
