"""Putting a training env back mid-episode on resume (rlbench.envs.episode_restore): a real MuJoCo env, whose
observations are float64, rebuilt by replaying its episode from the RNG state it started with."""

import numpy as np

from rlbench.envs.episode_restore import episode_records, restore_episodes
from rlbench.envs.make import make_vector_env

ENV = "HalfCheetah-v4"  # 1000-step episodes, float64 observations


def stepped(env, actions):
    obs = None
    for action in actions:
        obs, *_ = env.step(action[None])
    return obs


def test_a_mujoco_env_is_rebuilt_mid_episode_bit_for_bit_in_its_own_dtype():
    """1,300 steps: the second episode (begun by an autoreset from the env's RNG, not from a seed) is 300
    steps in. A fresh env, reset with another seed, replays it: the same float64 observation, bit for bit,
    and the same state (one more step gives the same observation). Comparing a float32 copy with the saved
    float64 observation, as resume did, found every MuJoCo env 'not restored' and restarted its episode."""
    actions = np.random.default_rng(0).uniform(-1, 1, (1301, 6)).astype(np.float32)
    first = make_vector_env(ENV, 1, "dummy", {}, record_episodes=True)
    first.reset(seed=1)
    saved_obs = stepped(first, actions[:1300])
    assert saved_obs.dtype == np.float64
    records = episode_records(first)
    assert "rng" in records[0].start and len(records[0].actions) == 300

    second = make_vector_env(ENV, 1, "dummy", {}, record_episodes=True)
    second.reset(seed=7)
    obs, restored = restore_episodes(second, records, saved_obs)
    assert restored.tolist() == [True]
    assert obs.dtype == np.float64 and np.array_equal(obs, saved_obs)
    np.testing.assert_array_equal(stepped(second, actions[1300:]), stepped(first, actions[1300:]))


def test_a_replay_that_does_not_reach_the_saved_observation_starts_a_new_episode():
    actions = np.random.default_rng(0).uniform(-1, 1, (40, 6)).astype(np.float32)
    first = make_vector_env(ENV, 1, "dummy", {}, record_episodes=True)
    first.reset(seed=1)
    saved_obs = stepped(first, actions)
    records = episode_records(first)
    records[0].actions[-1] += 0.25  # not the episode that led to saved_obs
    second = make_vector_env(ENV, 1, "dummy", {}, record_episodes=True)
    second.reset(seed=7)
    obs, restored = restore_episodes(second, records, saved_obs)
    assert restored.tolist() == [False] and not np.array_equal(obs, saved_obs)
    assert episode_records(second)[0].actions.shape == (0, 6)  # a new episode, nothing replayed
