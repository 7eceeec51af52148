"""gSDE (Raffin et al. 2021) as SB3 defines it: the log-probability against a direct computation, held
exploration noise that changes only at resamples, SB3's resampling schedule, the std parameterisations,
and the keys. The training loop's use of it: tests/integration/test_gsde.py."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from rlbench.algos.sac.update import make_learner as make_sac
from rlbench.algos.soft import acting
from rlbench.config.algorithms.sac import build_config as build_sac_config
from rlbench.config.registry import ALGORITHMS
from rlbench.errors import ConfigError
from rlbench.networks.actor import GSDEConfig, StateDependentNoise, gsde_std
from rlbench.networks.mlp import NetworkConfig
from tests.conftest import tiny_sac_config
from tests.unit.test_update import SPEC, initial_state, random_batches


def test_log_probability_matches_a_direct_computation():
    rng = np.random.default_rng(0)
    mean = rng.normal(size=(4, 2)).astype(np.float32)
    latent = rng.normal(size=(4, 3)).astype(np.float32)
    std = rng.uniform(0.1, 1.0, size=(3, 2)).astype(np.float32)
    key = jax.random.key(7)
    action, log_prob = StateDependentNoise(jnp.asarray(mean), jnp.asarray(latent), jnp.asarray(std)).sample(key)
    # The same draw by hand: one W for the batch, u = mean + latent W, and u | s ~ N(mean, latent^2 @ std^2).
    w = std * np.asarray(jax.random.normal(key, (3, 2)))
    u = mean + latent @ w
    sigma = np.sqrt((latent**2) @ (std**2) + 1e-6)
    gaussian = -0.5 * ((u - mean) / sigma) ** 2 - np.log(sigma) - 0.5 * math.log(2 * math.pi)
    expected = (gaussian - np.log(1 - np.tanh(u) ** 2)).sum(axis=1)
    np.testing.assert_allclose(np.asarray(action), np.tanh(u), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(np.asarray(log_prob), expected, rtol=1e-4, atol=1e-4)


def test_std_parameterisations():
    log_std = jnp.array([[-1.0], [0.0], [2.0]])  # [latent 3, 1]: one std per latent feature (full_std False)
    plain = gsde_std(log_std, GSDEConfig(full_std=False), action_dim=2)
    np.testing.assert_allclose(plain, np.repeat(np.exp([[-1.0], [0.0], [2.0]]), 2, axis=1), rtol=1e-6)
    expln = gsde_std(log_std, GSDEConfig(full_std=False, use_expln=True), action_dim=2)
    # exp below 0, log1p(x) + 1 above: continuous at 0 and slower than exp for large x.
    np.testing.assert_allclose(expln[:, 0], [math.exp(-1.0), 1.0, math.log1p(2.0) + 1.0], rtol=1e-6)


def gsde_learner(**gsde):
    cfg = tiny_sac_config(gsde=GSDEConfig(n_envs=3, **gsde))
    return cfg, make_sac(cfg, SPEC)


def test_noise_is_held_until_a_resample_and_changes_there():
    _, learner = gsde_learner()
    state = initial_state(learner)
    assert state.exploration.matrices.shape == (3, 8, SPEC.action_dim)  # one per env, [latent, action]
    obs = jax.random.normal(jax.random.key(1), (3, SPEC.obs_dim))
    act = jax.jit(acting.act)
    first, _ = act(state, obs, jax.random.key(2))
    again, _ = act(state, obs, jax.random.key(3))  # another key: the held matrices decide the noise
    np.testing.assert_array_equal(first, again)
    resampled = jax.jit(acting.resample_exploration)(state)
    assert not np.array_equal(resampled.exploration.matrices, state.exploration.matrices)
    assert not np.allclose(act(resampled, obs, jax.random.key(2))[0], first)
    # Each env explores with its own matrix: the same observation in every row gives different actions.
    same = jnp.broadcast_to(obs[:1], obs.shape)
    rows = np.asarray(act(state, same, jax.random.key(2))[0])
    assert not np.allclose(rows[0], rows[1])
    # Evaluation ignores the noise: the mode.
    np.testing.assert_array_equal(acting.act_deterministic(state, obs), acting.act_deterministic(resampled, obs))


@pytest.mark.parametrize(
    "sample_freq,due", [(-1, [0]), (2, [0, 2, 4, 6]), (3, [0, 3, 6])], ids=["rollout-start", "every-2", "every-3"]
)
def test_resample_schedule_is_sb3s(sample_freq, due):
    gsde = GSDEConfig(sample_freq=sample_freq)
    assert [n for n in range(8) if acting.resample_due(n, gsde.sample_freq)] == due


def test_gsde_keys_round_trip_and_refusals():
    entry = {
        "use_sde": True,
        "sde_sample_freq": 8,
        "use_sde_at_warmup": True,
        "policy_kwargs": {"log_std_init": -2, "use_expln": True, "full_std": False, "clip_mean": 1.5},
    }
    cfg = build_sac_config(entry, 2, "t")
    assert cfg.gsde == GSDEConfig(
        n_envs=2, sample_freq=8, at_warmup=True, log_std_init=-2.0, use_expln=True, full_std=False, clip_mean=1.5
    )
    spec = ALGORITHMS["sac"]
    assert build_sac_config(spec.config_to_hyperparams(cfg), 2, "t") == cfg
    assert spec.config_to_hyperparams(build_sac_config({}, 1, "t"))["use_sde"] is False
    # An RL Zoo entry with `-params use_sde:False`: its gSDE settings are ignored, with a warning.
    with pytest.warns(UserWarning, match="policy_kwargs.log_std_init: gSDE settings, ignored because use_sde is False"):
        assert build_sac_config({"use_sde": False, "policy_kwargs": {"log_std_init": -3}}, 1, "t").gsde is None
    with pytest.raises(ConfigError, match="sde_sample_freq: expected -1"):
        build_sac_config({"use_sde": True, "sde_sample_freq": 0}, 1, "t")
    with pytest.raises(ConfigError, match="use_sde: expected True or False"):
        build_sac_config({"use_sde": "yes"}, 1, "t")


def test_gsde_mean_is_clipped_before_the_squash():
    cfg = tiny_sac_config(actor=NetworkConfig(hidden=(8,)), gsde=GSDEConfig(clip_mean=0.5))
    state = initial_state(make_sac(cfg, SPEC))
    big = state.actor.params | {"mean": {**state.actor.params["mean"], "bias": jnp.full((SPEC.action_dim,), 9.0)}}
    policy = state.actor.apply_fn(state.actor.variables(big), jnp.zeros((2, SPEC.obs_dim)))
    np.testing.assert_allclose(policy.mode(), np.tanh(0.5), rtol=1e-6)


def test_a_gsde_update_reports_sb3s_train_std_and_a_plain_one_does_not():
    """SB3 logs train/std, the mean of gSDE's exploration std, with use_sde (issue 35 item 4): after one step
    from log_std_init -3 it is the mean of exp(log_std) over the learned [latent, action] log std, near e^-3."""
    _, learner = gsde_learner(log_std_init=-3.0)
    assert "train/std" in learner.metric_names and "train/std" not in make_sac(tiny_sac_config(), SPEC).metric_names
    state, metrics = jax.jit(learner.gradient_steps_fn)(
        initial_state(learner), random_batches(jax.random.key(1), 1, 4), jax.random.split(jax.random.key(2), 1), 1.0, 0
    )
    leaves = jax.tree_util.tree_leaves_with_path(state.actor.params)
    (log_std,) = [leaf for path, leaf in leaves if "log_std" in jax.tree_util.keystr(path)]
    assert log_std.shape == (8, SPEC.action_dim) and not np.allclose(log_std, -3.0)  # the step moved it
    np.testing.assert_allclose(metrics["train/std"], np.exp(np.asarray(log_std)).mean(), rtol=1e-6)
    np.testing.assert_allclose(metrics["train/std"], math.exp(-3.0), rtol=1e-2)
