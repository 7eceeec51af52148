"""JAX-native envs (rlbench.envs.jax_native): the vector layer's autoreset, time limit, action rescaling and key
chains against hand-computed values, the gymnasium view equal to it step by step, and the ids' bad input."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from rlbench.envs.bounds import non_finite_kwarg, unrescalable_bounds
from rlbench.envs.checks import check_env_id, check_env_runs
from rlbench.envs.jax_native.env import JaxEnv
from rlbench.envs.jax_native.gym_env import JaxGymEnv
from rlbench.envs.jax_native.ids import import_env_package, is_jax_native, make_jax_env
from rlbench.envs.jax_native.vector import (
    reset_envs,
    step_envs,
    step_envs_in_bounds,
    unit_to_bounds,
)
from rlbench.envs.make import final_observations, make_single_env, make_vector_env
from rlbench.errors import ConfigError
from rlbench.types import EnvSpec
from tests.variants import slow_variant

pytest.importorskip("gymnax")  # the jax-envs extra (the test extra installs it)


def walker_env(max_episode_steps: int = 100) -> JaxEnv:
    """A hand-built env: the position starts at uniform(key) in [0, 0.5) and moves by the action; reaching
    3 terminates; the reward is the action taken. Bounds [0, 2] (one dimension)."""

    def reset(key):
        position = jax.random.uniform(key, (), jnp.float32, 0.0, 0.5)
        return position, position[None]

    def step(position, action, key):
        position = position + action[0]
        return position, position[None], action[0], position >= 3.0

    bounds = np.array([0.0], np.float32), np.array([2.0], np.float32)
    return JaxEnv("test:walker", EnvSpec(1, 1), *bounds, max_episode_steps, reset, step)


def run_steps(env: JaxEnv, seeds, actions):
    """reset_envs then lax.scan of step_envs over actions [steps, n, action_dim]: (first carry, steps, last)."""
    carry = reset_envs(env, jnp.asarray(seeds, jnp.int32))

    def body(carry, action):
        carry, out = step_envs(env, carry, action)
        return carry, (out, carry.elapsed)

    last, (outs, elapsed) = jax.jit(lambda c, a: jax.lax.scan(body, c, a))(carry, jnp.asarray(actions))
    return carry, outs, elapsed, last


def next_start_obs(env: JaxEnv, seed: int, started_on: int = 0) -> np.ndarray:
    """The obs an env's next episode starts from, by the key chain's documented splits, when its current episode
    started on step `started_on` (0: the first reset, whose split draws it; else that step's split)."""
    key, _, start_key = jax.random.split(jax.random.key(seed), 3)
    for _ in range(started_on):
        key, _, start_key = jax.random.split(key, 3)
    return np.asarray(env.reset(start_key)[1])


def test_truncation_restarts_at_the_time_limit_and_keeps_the_final_obs():
    env = make_jax_env("gymnax:Pendulum-v1", {"max_steps_in_episode": 5})
    assert env.max_episode_steps == 5
    first, outs, elapsed, _ = run_steps(env, [3, 4], np.full((7, 2, 1), 0.25, np.float32))
    np.testing.assert_array_equal(np.asarray(outs.truncated[:, 0]), [0, 0, 0, 0, 1, 0, 0])
    assert not np.asarray(outs.terminated).any()  # Pendulum never terminates: its end is a time limit
    np.testing.assert_array_equal(np.asarray(elapsed[:, 1]), [1, 2, 3, 4, 0, 1, 2])
    final, next_obs = np.asarray(outs.final_obs), np.asarray(outs.next_obs)
    for t in (0, 1, 2, 3, 5, 6):  # no end: the transition ends where the env continues
        np.testing.assert_array_equal(final[t], next_obs[t])
    for env_index, seed in enumerate((3, 4)):
        np.testing.assert_array_equal(next_obs[4, env_index], next_start_obs(env, seed))
        assert not np.array_equal(final[4, env_index], next_obs[4, env_index])
    # The true last obs: Pendulum's obs is (cos, sin, angular velocity) of the state the fifth step reached.
    assert abs(float(np.hypot(final[4, 0, 0], final[4, 0, 1])) - 1.0) < 1e-5
    # The first reset follows the same chain: key(seed) split in three, the second part resets.
    _, reset_key, _ = jax.random.split(jax.random.key(3), 3)
    np.testing.assert_array_equal(np.asarray(first.obs[0]), np.asarray(env.reset(reset_key)[1]))
    # Every seed rlbench takes (up to 2**32 - 1) keys as the Python int; int32 and uint32 seeds agree below 2**31.
    big = reset_envs(env, np.array([2**32 - 1, 3], np.uint32))
    _, reset_key, _ = jax.random.split(jax.random.key(2**32 - 1), 3)
    np.testing.assert_array_equal(np.asarray(big.obs[0]), np.asarray(env.reset(reset_key)[1]))
    np.testing.assert_array_equal(np.asarray(big.obs[1]), np.asarray(first.obs[0]))


def test_termination_restarts_with_the_reset_key_and_is_not_truncation():
    env = walker_env(max_episode_steps=2)  # the second step both reaches 3 and hits the limit
    _, outs, elapsed, _ = run_steps(env, [0], np.ones((3, 1, 1), np.float32))  # unit 1 -> 2 per step
    np.testing.assert_array_equal(np.asarray(outs.terminated[:, 0]), [0, 1, 0])
    np.testing.assert_array_equal(np.asarray(outs.truncated[:, 0]), [0, 0, 0])  # terminated wins
    np.testing.assert_array_equal(np.asarray(elapsed[:, 0]), [1, 0, 1])
    first = reset_envs(env, jnp.array([0], jnp.int32)).obs[0, 0]
    assert float(outs.final_obs[1, 0, 0]) == pytest.approx(float(first) + 4.0)
    np.testing.assert_array_equal(np.asarray(outs.next_obs[1, 0]), next_start_obs(env, 0))
    assert float(outs.next_obs[1, 0, 0]) < 0.5  # a fresh start, not the end position


def test_an_env_that_ends_restarts_alone_and_the_others_step_on():
    """One env ends while the other steps on (the resets are selected per env), then a step where none ends (the
    resets are skipped): each env's observations are those of the env run alone."""
    env = walker_env()
    actions = np.array([[[1.0], [-1.0]], [[1.0], [-1.0]], [[-1.0], [-1.0]]], np.float32)  # unit 1: +2, -1: +0
    _, outs, elapsed, _ = run_steps(env, [0, 5], actions)
    np.testing.assert_array_equal(np.asarray(outs.terminated), [[0, 0], [1, 0], [0, 0]])
    np.testing.assert_array_equal(np.asarray(elapsed), [[1, 1], [0, 2], [1, 3]])
    np.testing.assert_array_equal(np.asarray(outs.next_obs[1, 0]), next_start_obs(env, 0))
    for index, seed in enumerate((0, 5)):
        _, alone, _, _ = run_steps(env, [seed], actions[:, index : index + 1])
        np.testing.assert_array_equal(np.asarray(outs.next_obs[:, index]), np.asarray(alone.next_obs[:, 0]))
        np.testing.assert_array_equal(np.asarray(outs.final_obs[:, index]), np.asarray(alone.final_obs[:, 0]))


def test_a_step_restarts_the_envs_it_ended_however_many():
    """40 envs: a step that ends none of them, one that ends 2, then one that ends 5: each ended env restarts from
    its own reset key, the others step on from where they were."""
    env = walker_env()
    unit = np.full(40, -1.0, np.float32)  # +0 per step: never ends
    unit[[3, 17]] = 1.0  # +2 per step: end on the second step
    unit[[0, 5, 9, 30, 39]] = 0.0  # +1 per step: end on the third
    first, outs, _, _ = run_steps(env, np.arange(40), np.tile(unit[None, :, None], (3, 1, 1)))
    ended = np.asarray(outs.terminated).astype(bool)
    assert [np.flatnonzero(row).tolist() for row in ended] == [[], [3, 17], [0, 5, 9, 30, 39]]
    next_obs, final_obs = np.asarray(outs.next_obs), np.asarray(outs.final_obs)
    for t in range(3):
        for i in range(40):
            if ended[t, i]:
                np.testing.assert_array_equal(next_obs[t, i], next_start_obs(env, i))
            else:
                np.testing.assert_array_equal(next_obs[t, i], final_obs[t, i])
    start = np.asarray(first.obs)[:, 0]
    expected = np.where(unit == 1.0, next_obs[1, :, 0] + 2.0, start + 3 * (unit + 1))
    np.testing.assert_allclose(final_obs[2, :, 0], expected)


def test_each_start_is_drawn_where_the_episode_before_it_started_whenever_it_is_computed():
    """Starts are computed ahead (NextStart): env 1 ends on steps 2, 4 and 6, and its ends with no start ready
    (4, 6) compute every env's missing start; env 0 ends on steps 5 and 7, so its second start is computed on step
    6 beside env 1 and on step 7 alone. Each start is reset(the key drawn on the step its episode before started),
    and env 0's steps are the same either way."""
    env = walker_env()
    plus = {0: -1.0, 1: 0.0, 2: 1.0}  # unit -> +0, +1, +2 per step
    env_0 = [plus[0]] * 3 + [plus[2]] * 4  # from [0, 0.5): 3 or more on step 5, then again on step 7
    env_1 = [plus[2]] * 7  # on steps 2, 4, 6
    actions = np.array([env_0, env_1], np.float32).T[:, :, None]
    _, outs, _, _ = run_steps(env, [0, 9], actions)
    ended = np.asarray(outs.terminated).astype(bool)
    assert [np.flatnonzero(ended[:, i]).tolist() for i in range(2)] == [[4, 6], [1, 3, 5]]  # steps 5, 7; 2, 4, 6
    next_obs = np.asarray(outs.next_obs)
    np.testing.assert_array_equal(next_obs[4, 0], next_start_obs(env, 0))
    np.testing.assert_array_equal(next_obs[6, 0], next_start_obs(env, 0, started_on=5))
    for step, started_on in ((2, 0), (4, 2), (6, 4)):
        np.testing.assert_array_equal(next_obs[step - 1, 1], next_start_obs(env, 9, started_on))
    _, alone, _, _ = run_steps(env, [0], actions[:, :1])
    for batched, single in zip(jax.tree.leaves(outs), jax.tree.leaves(alone), strict=True):
        np.testing.assert_array_equal(np.asarray(batched)[:, 0], np.asarray(single)[:, 0])


def test_actions_are_clipped_then_rescaled_to_the_bounds():
    low, high = np.array([-1.0, 0.5], np.float32), np.array([3.0, 2.5], np.float32)
    env = JaxEnv("test:bounds", EnvSpec(1, 2), low, high, 10, None, None)
    unit = jnp.array([[-1.0, 1.0], [0.0, 0.5], [5.0, -7.0]], jnp.float32)
    expected = np.array([[-1.0, 2.5], [1.0, 2.0], [3.0, 0.5]], np.float32)  # (a + 1) / 2 * (high - low) + low
    np.testing.assert_array_equal(np.asarray(unit_to_bounds(env, unit)), expected)
    # ... and the env receives them: the walker's reward is the action it was given, in [0, 2].
    _, outs, _, _ = run_steps(walker_env(), [0, 0, 0, 0], np.array([[[-1.0], [0.0], [0.5], [3.0]]], np.float32))
    np.testing.assert_array_equal(np.asarray(outs.reward[0]), [0.0, 1.0, 1.5, 2.0])


def test_the_key_chain_is_the_seed_only():
    env = make_jax_env("gymnax:Pendulum-v1", {"max_steps_in_episode": 20})
    actions = np.random.default_rng(0).uniform(-1, 1, (45, 3, 1)).astype(np.float32)
    actions[:, 2] = actions[:, 0]
    _, outs, _, _ = run_steps(env, [7, 8, 7], actions)
    for field in ("next_obs", "final_obs", "reward", "truncated"):
        values = np.asarray(getattr(outs, field))
        np.testing.assert_array_equal(values[:, 0], values[:, 2])  # across two restarts
        assert not np.array_equal(values[:, 0], values[:, 1]) or field == "truncated"


def test_under_a_seed_vmap_and_scan_equal_to_each_seed_alone():
    env = make_jax_env("gymnax:MountainCarContinuous-v0", {"max_steps_in_episode": 6})
    seeds = np.array([[1, 2], [3, 4], [5, 6]], np.int32)  # [n_seeds, n_envs]
    actions = np.random.default_rng(1).uniform(-1, 1, (10, 3, 2, 1)).astype(np.float32)

    def rollout(seed_row, action_rows):
        def body(carry, action):
            carry, out = step_envs(env, carry, action)
            return carry, out

        return jax.lax.scan(body, reset_envs(env, seed_row), action_rows)

    last, outs = jax.jit(jax.vmap(rollout, in_axes=(0, 1)))(seeds, actions)
    assert outs.next_obs.shape == (3, 10, 2, 2) and outs.reward.shape == (3, 10, 2)
    assert last.elapsed.shape == (3, 2) and last.obs.shape == (3, 2, 2)
    for k in range(3):
        _, alone, _, alone_last = run_steps(env, seeds[k], actions[:, k])
        for batched, single in zip(jax.tree.leaves(outs), jax.tree.leaves(alone), strict=True):
            np.testing.assert_array_equal(np.asarray(batched[k]), np.asarray(single))
        np.testing.assert_array_equal(np.asarray(last.obs[k]), np.asarray(alone_last.obs))


def test_the_gymnasium_view_steps_exactly_as_the_vector_envs():
    env = make_jax_env("gymnax:Pendulum-v1", {"max_steps_in_episode": 40})
    actions = jnp.asarray(np.random.default_rng(2).uniform(-1.2, 1.2, (300, 1, 1)).astype(np.float32))
    bounded = np.asarray(unit_to_bounds(env, actions))  # what gymnasium's RescaleAction would hand it
    carry = jax.jit(lambda seeds: reset_envs(env, seeds))(jnp.array([11], jnp.int32))
    gym_env = JaxGymEnv(env)
    obs, _ = gym_env.reset(seed=11)
    np.testing.assert_array_equal(obs, np.asarray(carry.obs[0]))
    step = jax.jit(lambda c, a: step_envs_in_bounds(env, c, a))
    ends = 0
    for t in range(300):
        carry, out = step(carry, bounded[t])
        obs, reward, terminated, truncated, _ = gym_env.step(bounded[t, 0])
        np.testing.assert_array_equal(obs, np.asarray(out.final_obs[0]))
        assert reward == float(out.reward[0]) and terminated == bool(out.terminated[0])
        assert truncated == bool(out.truncated[0])
        if terminated or truncated:  # gymnasium's SAME_STEP autoreset: an unseeded reset
            ends += 1
            np.testing.assert_array_equal(gym_env.reset()[0], np.asarray(out.next_obs[0]))
    assert ends == 7


def test_make_single_env_builds_the_gymnasium_view_in_unit_actions():
    env = make_single_env("gymnax:Pendulum-v1", {"max_steps_in_episode": 3})
    assert isinstance(env.unwrapped, JaxGymEnv)
    assert env.action_space.low.tolist() == [-1.0] and env.unwrapped.action_space.high.tolist() == [2.0]
    assert env.spec.max_episode_steps == 3
    env.reset(seed=0)
    assert [env.step(np.zeros(1, np.float32))[3] for _ in range(3)] == [False, False, True]  # truncated
    obs_space, action_space = check_env_runs("gymnax:Pendulum-v1", {}, (), (), "--env-kwargs")
    assert obs_space.shape == (3,) and action_space.high.tolist() == [2.0]


def test_jax_native_ids():
    assert is_jax_native("gymnax:Pendulum-v1") and is_jax_native("brax:halfcheetah")
    assert is_jax_native("playground:CheetahRun")
    assert not is_jax_native("Pendulum-v1") and not is_jax_native("my.mod:Env-v0")
    assert make_jax_env("gymnax:Pendulum-v1") is make_jax_env("gymnax:Pendulum-v1", {})  # one build per id
    check_env_id("gymnax:Pendulum-v1")


@pytest.mark.parametrize(
    ("env_id", "kwargs", "expected"),
    [
        ("gymnax:Pendulm-v1", None, "did you mean gymnax:Pendulum-v1"),
        ("gymnax:Catch-bsuite", None, "does not know this env's termination condition yet .*gymnax:CartPole-v1"),
        ("gymnax:Pendulum-v1", {"max_tork": 1.0}, "has no parameter 'max_tork'; valid: max_steps_in_episode"),
        ("gymnax:Pendulum-v1", {"max_torque": "strong"}, "max_torque must be a number"),
        ("gymnax:PointRobot-misc", {"dense_reward": 1}, "dense_reward must be True or False, got 1"),
        ("gymnax:Pendulum-v1", {"max_steps_in_episode": 2.5}, "max_steps_in_episode must be a positive integer"),
    ],
)
def test_bad_jax_env_ids_and_kwargs_are_config_errors(env_id, kwargs, expected):
    with pytest.raises(ConfigError, match=expected) as caught:
        make_jax_env(env_id, kwargs)
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize("name", ["CartPole-v1", slow_variant("Acrobot-v1"), "MountainCar-v0"])
def test_a_discrete_gymnax_env_terminates_where_gymnax_does_without_its_time_limit(name):
    """rlbench's reading of termination equals gymnax's is_terminal with the time limit out of reach, step by
    step along random-action episodes (each a few dozen steps for CartPole; Acrobot and MountainCar rarely
    end at random, so their states are pushed: every state is checked, ended or not)."""
    import gymnax

    jax_env = make_jax_env(f"gymnax:{name}")
    assert jax_env.spec == EnvSpec(obs_dim=jax_env.spec.obs_dim, action_dim=1, n_actions=jax_env.spec.n_actions)
    assert jax_env.spec.n_actions == {"CartPole-v1": 2, "Acrobot-v1": 3, "MountainCar-v0": 3}[name]
    env, params = gymnax.make(name)
    no_limit = params.replace(max_steps_in_episode=10**9)
    state, _ = jax_env.reset(jax.random.key(0))
    key, ends = jax.random.key(1), 0
    for _ in range(200):
        key, act_key, step_key = jax.random.split(key, 3)
        index = jax.random.randint(act_key, (1,), 0, jax_env.spec.n_actions).astype(jnp.float32)
        state, _, _, terminated = jax_env.step(state, index, step_key)
        assert bool(terminated) == bool(env.is_terminal(state, no_limit))
        if terminated:
            ends += 1
            state, _ = jax_env.reset(step_key)
    if name == "CartPole-v1":
        assert ends >= 5


@pytest.mark.parametrize(
    "name", ["Breakout-MinAtar", slow_variant("Asterix-MinAtar"), slow_variant("SpaceInvaders-MinAtar")]
)
def test_a_minatar_game_over_terminates_and_its_time_limit_truncates(name):
    """MinAtar's step stores terminal = game over or time limit: with the limit out of reach, rlbench's
    termination is gymnax's is_terminal at every step of random play; at the limit it is not a termination."""
    import gymnax

    env, params = gymnax.make(name)
    endless = make_jax_env(f"gymnax:{name}", {"max_steps_in_episode": 10**6})
    assert endless.spec.obs_dim == int(np.prod(env.observation_space(params).shape))  # flattened image
    no_limit = params.replace(max_steps_in_episode=10**6)

    def random_step(state, key):  # one compiled scan of random play, restarting at each termination
        act_key, step_key = jax.random.split(key)
        index = jax.random.randint(act_key, (1,), 0, endless.spec.n_actions).astype(jnp.float32)
        state, _, _, terminated = endless.step(state, index, step_key)
        gymnax_says = env.is_terminal(state, no_limit)
        state = jax.lax.cond(terminated, lambda: endless.reset(step_key)[0], lambda: state)
        return state, (terminated, gymnax_says)

    state, _ = endless.reset(jax.random.key(0))
    _, (terminated, gymnax_says) = jax.jit(
        lambda s: jax.lax.scan(random_step, s, jax.random.split(jax.random.key(1), 400))
    )(state)
    np.testing.assert_array_equal(np.asarray(terminated), np.asarray(gymnax_says))
    ends = int(np.sum(terminated))
    assert ends >= 1
    short = make_jax_env(f"gymnax:{name}", {"max_steps_in_episode": 3})
    state, _ = short.reset(jax.random.key(2))
    for _ in range(3):  # noop (action 0) until the limit: the game is not over, the time is
        state, _, _, terminated = short.step(state, jnp.zeros(1), jax.random.key(3))
    assert bool(env.is_terminal(state, params.replace(max_steps_in_episode=3))) and not bool(terminated)


def test_check_env_id_refuses_an_unknown_jax_env_with_close_matches():
    with pytest.raises(ConfigError, match="did you mean gymnax:MountainCarContinuous-v0"):
        check_env_id("gymnax:MountainCarContinous-v0")


def test_a_missing_package_names_the_extra():
    expected = r"needs the package 'no_such_jax_envs_package'.*: pip install -e \"\.\[jax-envs\]\"$"
    with pytest.raises(ConfigError, match=expected):
        import_env_package("nope:Env-v0", "no_such_jax_envs_package", "jax-envs")


def test_the_host_loops_vector_env_follows_the_device_loops_steps():
    """make_vector_env's JAX-native path (SAME_STEP autoreset, numpy's RescaleAction): the device loop's
    transitions, the actions rescaled in numpy instead of JAX."""
    kwargs = {"max_steps_in_episode": 30}
    env = make_jax_env("gymnax:Pendulum-v1", kwargs)
    vector_env = make_vector_env("gymnax:Pendulum-v1", 2, "dummy", kwargs)
    actions = np.random.default_rng(3).uniform(-1, 1, (70, 2, 1)).astype(np.float32)
    try:
        obs, _ = vector_env.reset(seed=[3, 4])
        carry = jax.jit(lambda seeds: reset_envs(env, seeds))(jnp.array([3, 4], jnp.int32))
        np.testing.assert_array_equal(obs, np.asarray(carry.obs))
        step = jax.jit(lambda c, a: step_envs(env, c, a))
        for action in actions:
            obs, reward, terminated, truncated, infos = vector_env.step(action)
            carry, out = step(carry, action)
            np.testing.assert_array_equal(truncated, np.asarray(out.truncated))
            assert not terminated.any() and not np.asarray(out.terminated).any()
            np.testing.assert_allclose(obs, np.asarray(out.next_obs), rtol=1e-5, atol=1e-6)
            np.testing.assert_allclose(reward, np.asarray(out.reward), rtol=1e-5, atol=1e-6)
            final = final_observations(obs, infos, terminated | truncated)
            np.testing.assert_allclose(final, np.asarray(out.final_obs), rtol=1e-5, atol=1e-6)
    finally:
        vector_env.close()
    assert int(np.asarray(out.truncated).sum()) == 0 and truncated.sum() == 0  # 70 = 2 ends and 10 steps


@pytest.mark.parametrize(
    ("env_id", "kwargs", "expected"),
    [
        ("gymnax:Pendulum-v1", {"max_torque": float("nan")}, "gymnax:Pendulum-v1's max_torque=nan is not finite"),
        ("gymnax:Pendulum-v1", {"g": float("inf")}, "gymnax:Pendulum-v1's g=inf is not finite"),
        ("Pendulum-v1", {"g": float("-inf")}, "Pendulum-v1's g=-inf is not finite"),
        (
            "gymnax:Pendulum-v1",
            {"max_torque": 1e308},
            r"gymnax:Pendulum-v1 with max_torque=1e\+308: action bounds low=\[-inf\] high=\[inf\] cannot be rescaled "
            r"from \[-1, 1\]: each bound and high - low must be finite in float32 \(at most 3.403e\+38\)$",
        ),
    ],
)
def test_env_kwargs_that_are_not_finite_or_make_infinite_action_bounds_are_refused(env_id, kwargs, expected):
    """Issue 44 items 6 and 7: before, NaN reached gymnasium's Box (a ValueError traceback), inf and 1e308
    trained (to inf action bounds, a diverged run)."""
    with pytest.raises(ConfigError, match=expected) as caught:
        check_env_runs(env_id, kwargs, (), (), "--env-kwargs / env_kwargs")
    assert "\n" not in str(caught.value) and str(caught.value).startswith("--env-kwargs / env_kwargs: ")


def test_inf_is_valid_inside_a_range_and_nan_nowhere():
    """A range's open end is inf (Hopper's healthy_z_range defaults to (0.7, inf)); NaN is never a value."""
    assert non_finite_kwarg({"healthy_z_range": (0.7, float("inf")), "scale": 2.0}) is None
    assert non_finite_kwarg({"healthy_z_range": (float("nan"), 1.0)}) == "healthy_z_range=(nan, 1.0)"
    assert non_finite_kwarg({"config": {"ctrl_dt": float("inf")}}) == "config.ctrl_dt=inf"
    assert unrescalable_bounds([-2.0], [2.0]) is None
    assert "cannot be rescaled" in unrescalable_bounds([-3e38], [3e38])  # finite, but high - low is not in float32
