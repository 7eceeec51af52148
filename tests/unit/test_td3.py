"""TD3 and DDPG: the TD target (clipped smoothing noise, twin minimum, termination), the delayed actor and
targets, the action noise against its recurrence, fused == unfused, one trace, and their keys."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from rlbench.algos.common.fused import make_update
from rlbench.buffers.uniform import make_uniform_buffer
from rlbench.config.hyperparams import merge
from rlbench.config.registry import get_algo
from rlbench.errors import ConfigError
from tests.unit.test_update import SPEC, initial_state, leaves_close, random_batches

TINY = {"batch_size": 4, "buffer_size": 64, "policy_kwargs": {"net_arch": [8, 8]}}


def td3_config(algo="td3", **overrides):
    spec = get_algo(algo)
    return spec.build_config(merge(spec.preset, TINY, overrides), 2, "test")


def learner_of(cfg, algo="td3"):
    return get_algo(algo).make_learner(cfg, SPEC)


def test_td_target_is_the_minimum_of_the_twin_targets_without_bootstrap_on_termination():
    from rlbench.algos.td3.update import td_target

    next_q = jnp.array([[1.0, 5.0, -2.0], [2.0, 3.0, -1.0]])  # [n_critics, B]
    target = td_target(next_q, jnp.array([0.5, 1.0, 0.0]), jnp.array([0.0, 1.0, 0.0]), 0.9)
    # 0.5 + 0.9 * min(1, 2); 1.0 (terminated: no bootstrap); 0 + 0.9 * min(-2, -1)
    np.testing.assert_allclose(np.asarray(target), [1.4, 1.0, -1.8], rtol=1e-6)


def test_target_policy_smoothing_noise_is_clipped_and_the_action_stays_in_bounds():
    from rlbench.algos.td3.update import smoothed_target_action

    cfg = td3_config(target_policy_noise=10.0, target_noise_clip=0.5)
    target_action = jnp.array([[0.9, -0.2, 0.0, -0.7]] * 64)
    key = jax.random.key(3)
    z = np.asarray(jax.random.normal(key, target_action.shape))
    got = np.asarray(smoothed_target_action(cfg, target_action, key))
    # With std 10 the noise is beyond the clip wherever |z| > 0.05: the action moves by exactly +-0.5.
    beyond = np.abs(z) > 0.05
    expected = np.clip(np.asarray(target_action) + 0.5 * np.sign(z), -1, 1)
    assert beyond.mean() > 0.9
    np.testing.assert_allclose(got[beyond], expected[beyond], rtol=1e-6)
    assert np.all(np.abs(got - np.asarray(target_action)) <= 0.5 + 1e-6) and np.all(np.abs(got) <= 1)
    # DDPG: no smoothing at all.
    ddpg = td3_config("ddpg")
    assert (ddpg.target_policy_noise, ddpg.target_noise_clip, ddpg.n_critics, ddpg.policy_delay) == (0.0, 0.0, 1, 1)
    np.testing.assert_array_equal(np.asarray(smoothed_target_action(ddpg, target_action, key)), target_action)


def test_actor_and_targets_update_every_policy_delay_steps_by_polyak():
    cfg = td3_config(policy_delay=3, tau=0.25)
    learner = learner_of(cfg)
    state = initial_state(learner)
    steps = jax.jit(learner.gradient_steps_fn)
    batches = random_batches(jax.random.key(1), 6, cfg.batch_size)
    keys = jax.random.split(jax.random.key(2), 6)
    actor_steps = []
    for i in range(6):
        before = state
        one = jax.tree.map(lambda x, i=i: x[i : i + 1], batches)
        state, metrics = steps(state, one, keys[i : i + 1], jnp.float32(1.0), state.step)
        actor_steps.append(int(state.actor.step))
        moved = int(state.actor.step) > int(before.actor.step)
        assert np.isnan(float(metrics["train/actor_loss"])) != moved
        for network in ("actor", "critic"):
            old, new = getattr(before, network), getattr(state, network)
            # Polyak with tau 0.25 towards the network after its step on actor steps; unchanged otherwise.
            expected = (
                jax.tree.map(lambda t, p: 0.25 * p + 0.75 * t, old.target_params, new.params)
                if moved
                else old.target_params
            )
            leaves_close(new.target_params, expected, tol=1e-6)
    assert actor_steps == [0, 0, 1, 1, 1, 2]  # gradient steps 3 and 6, as SB3 counts
    assert int(state.critic.step) == 6


@pytest.mark.parametrize("algo", ["td3", "ddpg"])
def test_fused_equals_unfused(algo):
    cfg = td3_config(algo)
    learner = learner_of(cfg, algo)
    state = initial_state(learner)
    batches = random_batches(jax.random.key(1), 4, cfg.batch_size)
    keys = jax.random.split(jax.random.key(2), 4)
    steps = jax.jit(learner.gradient_steps_fn)
    fused, _ = steps(state, batches, keys, jnp.float32(0.7), state.step)
    single = state
    for i in range(4):
        one = jax.tree.map(lambda x, i=i: x[i : i + 1], batches)
        single, _ = steps(single, one, keys[i : i + 1], jnp.float32(0.7), single.step)
    assert int(fused.step) == 4 and int(fused.actor.step) == (2 if algo == "td3" else 4)
    leaves_close(fused, single)


def test_update_traces_once_over_changing_policy_delay_offsets():
    cfg = td3_config(policy_delay=3, gradient_steps=2)
    learner = learner_of(cfg)
    buffer = make_uniform_buffer(cfg.buffer_size, SPEC)
    update_fn = make_update(cfg, buffer, learner.gradient_steps_fn)
    n_traces = 0

    def counted(state, buffer_state, new, progress):
        nonlocal n_traces
        n_traces += 1
        return update_fn(state, buffer_state, new, progress, state.step)

    update = jax.jit(counted, donate_argnums=(0, 1))
    state, buffer_state = initial_state(learner), buffer.init_fn()
    new = jax.tree.map(lambda x: x[0], random_batches(jax.random.key(1), 1, 4))
    for i in range(5):
        state, buffer_state, _ = update(state, buffer_state, new, jnp.asarray(1 - i / 5))
    assert n_traces == 1 and int(state.step) == 10 and int(state.actor.step) == 3


def explore_steps(cfg, episode_starts):
    """The actions and exploration states of successive explore calls on 2 envs, and the actor's actions."""
    learner = learner_of(cfg)
    state = initial_state(learner)
    obs = jax.random.normal(jax.random.key(5), (2, SPEC.obs_dim))
    explore = jax.jit(learner.acting.explore)
    key, out = jax.random.key(9), []
    for start in episode_starts:
        action, exploration, next_key = explore(state, obs, key, jnp.asarray(start), jnp.float32(1.0))
        white = jax.random.normal(jax.random.split(key)[1], action.shape)  # the draw explore makes
        out.append((np.asarray(action), None if exploration is None else np.asarray(exploration), np.asarray(white)))
        state, key = state.replace(exploration=exploration), next_key
    return out, np.asarray(learner.acting.evaluate(state, obs))


def test_ornstein_uhlenbeck_noise_follows_its_recurrence_and_restarts_at_episode_starts():
    cfg = td3_config(noise_type="ornstein-uhlenbeck", noise_std=0.7)
    starts = [[True, True], [False, False], [False, True], [False, False], [True, False]]
    steps, mu = explore_steps(cfg, starts)
    x = np.zeros((2, SPEC.action_dim))
    for (action, exploration, white), start in zip(steps, starts, strict=True):
        x = np.where(np.asarray(start)[:, None], 0.0, x)  # SB3's reset
        x = x + 0.15 * (0.0 - x) * 1e-2 + 0.7 * np.sqrt(1e-2) * white
        np.testing.assert_allclose(exploration, x, rtol=1e-5, atol=1e-7)
        np.testing.assert_allclose(action, np.clip(mu + x, -1, 1), rtol=1e-5, atol=1e-7)


def test_normal_noise_is_std_times_a_fresh_draw_and_evaluation_is_the_actor():
    cfg = td3_config(noise_type="normal", noise_std=0.2)
    steps, mu = explore_steps(cfg, [[True, True], [False, False]])
    for action, exploration, white in steps:
        assert exploration is None
        np.testing.assert_allclose(action, np.clip(mu + 0.2 * white, -1, 1), rtol=1e-5, atol=1e-7)
    assert not np.allclose(steps[0][0], steps[1][0])
    ((action, _, _),) = explore_steps(td3_config(), [[False, False]])[0]  # no noise_type: no noise
    np.testing.assert_array_equal(action, mu)


def test_the_config_is_written_back_as_it_was_read():
    algo = get_algo("td3")
    for overrides in ({}, {"noise_type": "ornstein-uhlenbeck", "noise_std": 0.5, "tau": 0.01}):
        cfg = td3_config(**overrides)
        assert algo.build_config(algo.config_to_hyperparams(cfg), 2, "saved") == cfg


@pytest.mark.parametrize(
    "algo,params,message",
    [
        (
            "td3",
            {"ent_coef": "auto"},
            r"^ent_coef: a key of sac, droq, crossq, tqc, ppo, a2c; --algo td3 does not read it",
        ),
        (
            "ddpg",
            {"use_sde": True},
            r"^use_sde: a key of sac, droq, crossq, tqc, ppo, a2c; --algo ddpg does not read it",
        ),
        ("sac", {"noise_type": "normal"}, r"^noise_type: a key of td3, ddpg; --algo sac does not read it"),
        ("crossq", {"target_policy_noise": 0.1}, r"^target_policy_noise: a key of td3, ddpg; --algo crossq"),
        ("td3", {"noise_type": "normal", "noise_std": -0.1}, r"^noise_std: -0.1 is out of range \[0, inf\]"),
        ("td3", {"noise_type": "normal", "noise_std": float("nan")}, r"^noise_std: expected a finite number"),
        ("td3", {"noise_type": "brownian", "noise_std": 0.1}, r"^noise_type: expected one of normal, ornstein-uhl"),
        ("td3", {"noise_type": "normal"}, r"^noise_std: needed with noise_type 'normal'"),
        ("td3", {"policy_kwargs": {"n_quantiles": 5}}, r"^policy_kwargs.n_quantiles: a key of crossq, tqc"),
    ],
)
def test_bad_keys_are_refused_in_one_line_naming_the_key(algo, params, message):
    with pytest.raises(ConfigError, match=message) as error:
        get_algo(algo).build_config(params, 1, "test")
    assert "\n" not in str(error.value)


def test_another_algorithms_key_switched_off_is_left_out():
    assert get_algo("sac").build_config({"noise_type": None}, 1, "t") == get_algo("sac").build_config({}, 1, "t")
