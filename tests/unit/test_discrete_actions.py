"""Discrete action spaces in the env layer (rlbench.envs.discrete): a Discrete(n) env takes its action's index
in one float action column, reports EnvSpec(obs_dim, 1, n), records its index space in the manifest (whose
forged counts are refused by name), and replays its episodes on resume. Other non-Box spaces are refused."""

import copy
import json
import re
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest

from rlbench.envs.checks import check_env_runs
from rlbench.envs.discrete import IndexActions
from rlbench.envs.episode_restore import episode_records, restore_episodes
from rlbench.envs.make import env_spec, flat_box_in_unit_actions, make_single_env, make_vector_env
from rlbench.errors import ConfigError
from rlbench.run.probe import describe_space, spaces_spec
from rlbench.store.manifest import Spaces, read_manifest
from rlbench.store.schema import ManifestError
from rlbench.types import EnvSpec
from tests.conftest import REPO_ROOT

FORMAT3 = Path(REPO_ROOT) / "tests" / "data" / "manifest_format3.json"  # a SAC Pendulum run's manifest


def cartpole_indices(steps: int) -> list[int]:
    """Left and right pushes in turn (0 left, 1 right): the pole stays up for more steps than a test takes."""
    return [step % 2 for step in range(steps)]


@pytest.mark.parametrize("env_id,n", [("CartPole-v1", 2), ("Acrobot-v1", 3)])
def test_an_index_steps_the_env_with_that_action(env_id, n):
    """The wrapped env, given float indices, walks the same trajectory as the bare env given the actions."""
    wrapped, bare = make_single_env(env_id, {}), gym.make(env_id)
    assert wrapped.action_space == gym.spaces.Box(0, n - 1, (1,), np.int64)
    indices = np.random.default_rng(0).integers(0, n, 20)
    obs, _ = wrapped.reset(seed=5)
    expected, _ = bare.reset(seed=5)
    np.testing.assert_array_equal(obs, expected)
    for index in indices:
        obs, reward, terminated, *_ = wrapped.step(np.array([index], np.float32))
        expected, expected_reward, expected_terminated, *_ = bare.step(int(index))
        np.testing.assert_array_equal(obs, expected)
        assert (reward, terminated) == (expected_reward, expected_terminated)
        if terminated:
            break


class ShiftedActions(gym.ActionWrapper):
    """CartPole's two actions as Discrete(2, start=5): 5 pushes left, 6 right."""

    def __init__(self, env):
        super().__init__(env)
        self.action_space = gym.spaces.Discrete(2, start=5)

    def action(self, action):
        return int(action) - 5


def test_a_discrete_space_that_starts_elsewhere_is_indexed_from_0():
    env = IndexActions(ShiftedActions(gym.make("CartPole-v1")))
    assert (env.action(np.array([0.0], np.float32)), env.action(1.0)) == (5, 6)


@pytest.mark.parametrize(
    "action,reason",
    [
        (np.array([2.0]), "action index 2.0 is not one of Discrete(2)'s 0..1"),
        (np.array([-0.7]), "action index -0.7 is not one of"),
        (np.array([np.nan]), "action index nan is not one of"),
        (np.array([0.0, 1.0]), "a Discrete(2) action is one index, got an array of shape (2,)"),
    ],
)
def test_an_index_outside_the_actions_is_a_bug_not_a_clipped_action(action, reason):
    env = make_single_env("CartPole-v1", {})
    env.reset(seed=0)
    with pytest.raises(ValueError, match=f"^{re.escape(reason)}"):
        env.step(action)


@pytest.mark.parametrize("vec_env", ["dummy", "subproc"])
def test_a_discrete_vector_env_has_one_action_column_and_its_count(vec_env):
    env = make_vector_env("CartPole-v1", 2, vec_env, {})
    try:
        assert env_spec(env) == EnvSpec(4, 1, 2) and env_spec(env).discrete
        env.reset(seed=0)
        obs, *_ = env.step(np.array([[0.0], [1.0]], np.float32))  # the loop's float32 [n_envs, 1] actions
        assert obs.shape == (2, 4)
    finally:
        env.close()


def test_a_box_env_keeps_its_spec():
    env = make_vector_env("Pendulum-v1", 1, "dummy", {})
    assert env_spec(env) == EnvSpec(3, 1, 0) and not env_spec(env).discrete
    env.close()


@pytest.mark.parametrize("env_id,spec", [("CartPole-v1", EnvSpec(4, 1, 2)), ("Acrobot-v1", EnvSpec(6, 1, 3))])
def test_the_recorded_spaces_give_back_the_spec(env_id, spec):
    """check_env_runs's spaces, as the manifest records them, read back as the spec of the env itself."""
    obs_space, action_space = check_env_runs(env_id, {}, (), (), "--env-kwargs")
    spaces = json.loads(json.dumps({"observation": describe_space(obs_space), "action": describe_space(action_space)}))
    assert spaces["action"] == {"shape": [1], "dtype": "int64", "low": [0.0], "high": [spec.n_actions - 1.0]}
    assert spaces_spec(spaces) == Spaces.from_json(spaces).spec == spec


def discrete_manifest(action: dict) -> dict:
    """The format-3 manifest with a Discrete action space's description in place of Pendulum's Box."""
    manifest = copy.deepcopy(json.loads(FORMAT3.read_text()))
    manifest["spaces"]["action"] = action
    return manifest


def test_a_manifest_with_a_discrete_action_space_reads_back_its_count():
    action = {"shape": [1], "dtype": "int64", "low": [0.0], "high": [2.0]}
    assert read_manifest(discrete_manifest(action)).run.spaces.spec == EnvSpec(3, 1, 3)


@pytest.mark.parametrize(
    "changes,reason",
    [
        ({"high": [2.0**40]}, "manifest spaces.action.high: an integer (int64) action space is a Discrete env's"),
        ({"high": [1.5]}, "manifest spaces.action.high:"),
        ({"high": [-1]}, "manifest spaces.action.high:"),
        ({"high": [10**400]}, "manifest spaces.action.high:"),  # float() of it overflows: compared first
        ({"shape": [2], "low": [0, 0], "high": [1, 1]}, "manifest spaces.action.shape: an integer (int64) action"),
        ({"shape": [2]}, "manifest spaces.action: shape [2] describes 2 values, but its low and high list 1 and 1"),
        ({"low": [1.0]}, "manifest spaces.action.low: an integer (int64) action space is a Discrete env's"),
    ],
)
def test_a_forged_discrete_action_space_is_refused_by_name(changes, reason):
    action = {"shape": [1], "dtype": "int64", "low": [0.0], "high": [1.0], **changes}
    with pytest.raises(ManifestError, match=f"^{re.escape(reason)}"):
        read_manifest(discrete_manifest(action))


class AsSpace(gym.ActionWrapper):
    """CartPole behind another action space (first value is the action), as an env of that space would be."""

    def __init__(self, env, space):
        super().__init__(env)
        self.action_space = space

    def action(self, action):
        return int(np.ravel(action)[0])


@pytest.mark.parametrize(
    "space",
    [
        gym.spaces.MultiDiscrete([2, 2]),
        gym.spaces.MultiBinary(2),
        gym.spaces.Box(0, 1, (1,), np.int64),  # integer dtype means a Discrete index downstream
    ],
    ids=["MultiDiscrete", "MultiBinary", "integer Box"],
)
def test_other_action_spaces_are_refused_naming_the_supported_ones(space):
    with pytest.raises(ConfigError, match=r"^CartPole-v1: rlbench supports Box \(float\) and Discrete action spaces"):
        flat_box_in_unit_actions(AsSpace(gym.make("CartPole-v1"), space), "CartPole-v1")


def test_more_actions_than_a_float32_index_holds_are_refused():
    env = AsSpace(gym.make("CartPole-v1"), gym.spaces.Discrete(2**24 + 1))
    with pytest.raises(ConfigError, match=r"more actions than rlbench's learners index exactly \(at most 2\*\*24"):
        flat_box_in_unit_actions(env, "CartPole-v1")


def test_a_discrete_episode_is_replayed_on_resume():
    """The recorder keeps the float indices the loop passed; replaying them reaches the saved observation."""
    actions = np.array(cartpole_indices(8), np.float32).reshape(8, 1, 1)
    first = make_vector_env("CartPole-v1", 1, "dummy", {}, record_episodes=True)
    first.reset(seed=3)
    for action in actions:
        saved_obs, *_ = first.step(action)
    records = episode_records(first)
    assert records[0].actions.shape == (8, 1) and records[0].actions.dtype == np.float32

    second = make_vector_env("CartPole-v1", 1, "dummy", {}, record_episodes=True)
    second.reset(seed=11)
    obs, restored = restore_episodes(second, records, saved_obs)
    assert restored.tolist() == [True] and np.array_equal(obs, saved_obs)
    first.close()
    second.close()
