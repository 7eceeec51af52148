"""PPO's Learner on the loop's staged transitions (issue 45): the rollout it reads from them (values and
log-probabilities from the collecting parameters, a truncation bootstrapped from the step's own final
observation, env columns kept apart), its acting in Box and Discrete spaces, RL Zoo's format of its keys,
and RL Zoo 2.9.2's own ppo.yml and a2c.yml entries."""

from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import yaml

from rlbench.algos.ppo.gae import generalized_advantages
from rlbench.algos.ppo.learner import make_learner, staged_rollout
from rlbench.config.entry import normalize_entry, split_entry
from rlbench.config.registry import get_algo
from rlbench.errors import ConfigError
from rlbench.networks.distributions import StateDependentGaussian
from rlbench.types import EnvSpec, Transition
from tests.unit.test_ppo import sb3_gae_loop
from tests.variants import slow_variant

REPO = Path(__file__).resolve().parents[2]
SPEC = EnvSpec(obs_dim=3, action_dim=2)
N_STEPS, N_ENVS = 4, 2


def ppo_config(**keys):
    base = {"n_steps": N_STEPS, "batch_size": 4, "n_epochs": 2, "policy_kwargs": {"net_arch": [8]}}
    return get_algo("ppo").build_config(base | keys, N_ENVS, "test")


def staged(seed=0, spec=SPEC):
    """N_STEPS x N_ENVS transitions as the loop stages them (step after step): env 0 terminates at t=1 and
    is truncated at t=2; env 1 runs on."""
    keys = jax.random.split(jax.random.key(seed), 4)
    n = N_STEPS * N_ENVS
    z = np.zeros(n, np.float32)
    terminated, truncated = z.copy(), z.copy()
    terminated[1 * N_ENVS + 0] = 1.0
    truncated[2 * N_ENVS + 0] = 1.0
    action_shape = (n, 1) if spec.discrete else (n, spec.action_dim)
    action = jax.random.normal(keys[1], action_shape)
    if spec.discrete:
        action = jnp.floor(jax.random.uniform(keys[1], action_shape, maxval=spec.n_actions))
    return Transition(
        obs=jax.random.normal(keys[0], (n, spec.obs_dim)),
        action=action,
        reward=jax.random.normal(keys[2], (n,)),
        next_obs=jax.random.normal(keys[3], (n, spec.obs_dim)),
        terminated=jnp.asarray(terminated),
        truncated=jnp.asarray(truncated),
    )


@pytest.mark.parametrize(
    "spec", [SPEC, slow_variant(EnvSpec(obs_dim=3, action_dim=1, n_actions=4))], ids=["box", "discrete"]
)
def test_staged_rollout_reads_values_and_log_probs_row_by_row(spec):
    cfg = ppo_config()
    learner = make_learner(cfg, spec)
    state = learner.init_fn(jax.random.key(1))
    new = staged(spec=spec)
    rollout = staged_rollout(state, new, N_STEPS, spec)
    apply = state.policy.apply_fn
    for t in range(N_STEPS):
        for env in range(N_ENVS):
            row = t * N_ENVS + env  # the loop stages step after step, every env of a step together
            distribution, value = apply({"params": state.policy.params}, new.obs[row][None])
            action = new.action[row][None]
            action = action[:, 0].astype(jnp.int32) if spec.discrete else action
            np.testing.assert_allclose(rollout.steps.value[t, env], value[0], rtol=1e-5)
            np.testing.assert_allclose(rollout.steps.log_prob[t, env], distribution.log_prob(action)[0], rtol=1e-5)
            _, final_value = apply({"params": state.policy.params}, new.next_obs[row][None])
            np.testing.assert_allclose(rollout.steps.final_value[t, env], final_value[0], rtol=1e-5)
    np.testing.assert_array_equal(rollout.last_obs, new.next_obs[-N_ENVS:])


def test_advantages_of_staged_transitions_match_sb3s_loop():
    """SB3 bootstraps a truncation with V(terminal obs) and the rollout's end with V(new obs); both are the
    staged step's final observation here (for a step that did not end, the next step's observation)."""
    cfg = ppo_config(gamma=0.9, gae_lambda=0.8)
    learner = make_learner(cfg, SPEC)
    state = learner.init_fn(jax.random.key(2))
    new = staged(3)
    # Where an episode goes on, the next step starts where this one ended: make the data say so.
    obs = np.array(new.obs).reshape(N_STEPS, N_ENVS, -1)
    next_obs = np.array(new.next_obs).reshape(N_STEPS, N_ENVS, -1)
    ended = np.maximum(np.array(new.terminated), np.array(new.truncated)).reshape(N_STEPS, N_ENVS)
    for t in range(N_STEPS - 1):
        for env in range(N_ENVS):
            if not ended[t, env]:
                obs[t + 1, env] = next_obs[t, env]
    new = new._replace(obs=jnp.asarray(obs.reshape(-1, 3)))
    rollout = staged_rollout(state, new, N_STEPS, SPEC)
    _, last_value = state.policy.apply_fn({"params": state.policy.params}, rollout.last_obs)
    got = generalized_advantages(rollout.steps, last_value, cfg.gamma, cfg.gae_lambda)
    want, _ = sb3_gae_loop(rollout.steps, last_value, ended[-1], cfg.gamma, cfg.gae_lambda)
    np.testing.assert_allclose(got.advantages, want, rtol=1e-5, atol=1e-6)
    # The truncated step (t=2, env 0) reads V(its final obs), not the next episode's first value.
    delta = rollout.steps.reward[2, 0] + cfg.gamma * rollout.steps.final_value[2, 0] - rollout.steps.value[2, 0]
    np.testing.assert_allclose(got.advantages[2, 0], delta, rtol=1e-5)


def test_update_runs_on_staged_transitions_and_counts_sb3s_n_updates():
    cfg = ppo_config(n_epochs=3)
    learner = make_learner(cfg, SPEC)
    state = learner.init_fn(jax.random.key(0))
    update = jax.jit(learner.update_fn)
    state, storage, metrics = update(state, learner.storage.init_fn(), staged(), 1.0, 0, None)
    assert storage == () and int(metrics["train/n_updates"]) == 3 and int(state.step) == 3 * 2
    assert set(learner.metric_names) == set(metrics)
    assert all(np.isfinite(float(value)) for value in metrics.values())


def test_acting_in_a_discrete_space_returns_the_index_as_one_float_column():
    spec = EnvSpec(obs_dim=3, action_dim=1, n_actions=5)
    learner = make_learner(ppo_config(), spec)
    state = learner.init_fn(jax.random.key(0))
    obs = jax.random.normal(jax.random.key(1), (64, 3))
    action, _, _ = learner.acting.explore(state, obs, jax.random.key(2), jnp.zeros(64, bool), jnp.float32(1.0))
    assert action.shape == (64, 1) and action.dtype == jnp.float32
    assert set(np.unique(np.asarray(action))) <= set(range(5)) and len(np.unique(np.asarray(action))) > 1
    distribution, _ = state.policy.apply_fn({"params": state.policy.params}, obs)
    np.testing.assert_array_equal(learner.acting.evaluate(state, obs)[:, 0], jnp.argmax(distribution.logits, -1))


def test_box_acting_keeps_the_sample_and_evaluates_the_clipped_mean():
    cfg = ppo_config(policy_kwargs={"net_arch": [8], "log_std_init": 1.0})
    learner = make_learner(cfg, SPEC)
    state = learner.init_fn(jax.random.key(0))
    obs = jax.random.normal(jax.random.key(1), (256, 3))
    action, _, _ = learner.acting.explore(state, obs, jax.random.key(2), jnp.zeros(256, bool), jnp.float32(1.0))
    assert float(jnp.abs(action).max()) > 1.0  # std e: the sample leaves [-1, 1], and the rollout keeps it
    sampled, _ = learner.acting.sample(state, obs, jax.random.key(2))
    np.testing.assert_array_equal(sampled, jnp.clip(action, -1.0, 1.0))  # enjoy.py --stochastic: clipped
    assert float(jnp.abs(learner.acting.evaluate(state, obs)).max()) <= 1.0


# --- RL Zoo's format ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "net_arch,pi,vf",
    [
        ([32, 16], (32, 16), (32, 16)),
        ({"pi": [64], "vf": [32, 32]}, (64,), (32, 32)),
        ([{"pi": [8], "vf": [4]}], (8,), (4,)),  # SB3's older list-wrapped form
    ],
)
def test_net_arch_spellings(net_arch, pi, vf):
    cfg = ppo_config(policy_kwargs={"net_arch": net_arch})
    assert (cfg.network.pi, cfg.network.vf) == (pi, vf)


@pytest.mark.parametrize("algo", ["ppo", "a2c"])
def test_written_hyperparams_read_back_to_the_same_config(algo):
    keys = {"n_steps": 8, "learning_rate": "lin_7e-4", "gamma": 0.95, "ent_coef": 0.01, "normalize_advantage": True}
    keys |= {"policy_kwargs": {"net_arch": {"pi": [16], "vf": [8]}, "ortho_init": False, "log_std_init": -1.0}}
    if algo == "ppo":
        keys |= {"batch_size": 16, "clip_range": "lin_0.1", "clip_range_vf": 0.3, "target_kl": 0.02}
    else:
        keys |= {"use_rms_prop": False, "rms_prop_eps": 1e-4}
    algorithm = get_algo(algo)
    cfg = algorithm.build_config(keys, 4, "test")
    assert algorithm.build_config(algorithm.config_to_hyperparams(cfg), 4, "again") == cfg


def test_a_batch_size_that_does_not_divide_the_rollout_warns_as_sb3():
    with pytest.warns(UserWarning, match="batch_size: 24 does not divide the rollout's n_steps x n_envs = 32"):
        assert ppo_config(batch_size=24, n_steps=16).batch_size == 24


def test_a2c_reads_sb3s_a2c_defaults():
    cfg = get_algo("a2c").build_config({}, 1, "test")
    assert (cfg.n_steps, cfg.batch_size, cfg.n_epochs, cfg.gae_lambda) == (5, None, 1, 1.0)
    assert (cfg.optimizer, cfg.rms_prop_alpha, cfg.optimizer_eps, cfg.normalize_advantage) == (
        "rmsprop",
        0.99,
        1e-5,
        False,
    )
    assert get_algo("a2c").build_config({"use_rms_prop": False}, 1, "test").optimizer == "adam"


@pytest.mark.parametrize(
    "algo,keys,n_envs,message",
    [
        ("ppo", {"batch_size": 64, "n_steps": 16}, 2, "batch_size: 64 is larger than the rollout"),
        ("ppo", {"n_steps": 1, "batch_size": 1}, 1, "one sample has no std"),
        ("ppo", {"gae_lambda": 1.5}, 1, "gae_lambda: 1.5 is out of range"),
        ("ppo", {"clip_range": 0}, 1, "clip_range: expected a finite number > 0"),
        ("ppo", {"clip_range": "lin_-0.2"}, 1, "clip_range: expected a finite number > 0"),
        ("ppo", {"use_sde": "yes"}, 1, "use_sde: expected True or False"),
        ("ppo", {"policy": "SimbaPolicy"}, 1, "policy: 'SimbaPolicy' is not supported; valid: MlpPolicy, CnnPolicy"),
        ("ppo", {"tau": 0.01}, 1, "tau: a key of sac, droq, tqc, td3, ddpg, dqn, qrdqn; --algo ppo does not read it"),
        ("a2c", {"n_epochs": 4}, 1, "n_epochs: a key of ppo; --algo a2c does not read it"),
        ("sac", {"gae_lambda": 0.9}, 1, "gae_lambda: a key of ppo, a2c; --algo sac does not read it"),
        ("ppo", {"policy_kwargs": {"optimizer_class": "Adam"}}, 1, "optimizer_class: only RMSpropTFLike"),
        ("a2c", {"policy_kwargs": {"optimizer_kwargs": {"eps": 1e-5}}}, 1, "read only with optimizer_class"),
    ],
)
def test_bad_keys_name_the_key(algo, keys, n_envs, message):
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace("+", r"\+")):
        get_algo(algo).build_config(keys, n_envs, "test")


@pytest.mark.parametrize("algo", ["ppo", "a2c"])
def test_every_rl_zoo_entry_builds_or_names_what_rlbench_lacks(algo):
    """RL Zoo 2.9.2's own file, shipped unchanged: each entry's learner keys build a config, or the entry is
    refused naming why (every entry builds today but the MuJoCo -v2 ones)."""
    table = yaml.safe_load((REPO / "hyperparams" / f"{algo}.yml").read_text())
    built, refused = 0, 0
    for env_id, entry in table.items():
        entry = normalize_entry(entry, env_id)
        entry.pop("env_wrapper", None)  # the env's, checked when an env is built
        _, _, keys = split_entry(entry, env_id, trusted_wrapper_modules=())
        try:
            get_algo(algo).build_config(keys, int(entry.get("n_envs", 1)), env_id)
            built += 1
        except ConfigError as error:
            # The MuJoCo -v2 entries (mujoco-py envs, which gymnasium cannot make) ask for a batch_size larger than
            # their rollout, which rlbench refuses (SB3 warns).
            lacking = ("batch_size" if env_id.endswith("-v2") else "-",)
            assert any(name in str(error) for name in lacking), (env_id, error)
            refused += 1
    assert built >= 10, (built, refused)


# --- gSDE ------------------------------------------------------------------------------------------------


def test_state_dependent_gaussian_density_and_entropy_by_hand():
    mean = jnp.array([[0.5, -1.0]])
    latent = jnp.array([[1.0, 2.0, -1.0]])
    std = jnp.array([[0.5, 1.0], [0.1, 0.2], [2.0, 0.0]])
    distribution = StateDependentGaussian(mean=mean, latent=latent, std=std)
    # sigma_j^2 = sum_i latent_i^2 std_ij^2 + 1e-6: j=0: 0.25 + 0.04 + 4 = 4.29; j=1: 1 + 0.16 + 0 = 1.16
    sigma = np.sqrt(np.array([4.29, 1.16]) + 1e-6)
    action = np.array([1.0, 0.0])
    z = (action - np.array([0.5, -1.0])) / sigma
    want = np.sum(-0.5 * z**2 - np.log(sigma) - 0.5 * np.log(2 * np.pi))
    np.testing.assert_allclose(distribution.log_prob(jnp.asarray(action)[None])[0], want, rtol=1e-6)
    np.testing.assert_allclose(
        distribution.entropy()[0], np.sum(0.5 + 0.5 * np.log(2 * np.pi) + np.log(sigma)), rtol=1e-6
    )
    matrices = jnp.stack([std * 0.5])  # one env's held W
    np.testing.assert_allclose(distribution.explore(matrices), mean + latent @ (std * 0.5), rtol=1e-6)


def test_gsde_acts_with_each_envs_held_matrix_and_resamples_on_sb3s_schedule():
    cfg = ppo_config(use_sde=True, sde_sample_freq=4, policy_kwargs={"net_arch": [8], "log_std_init": -1.0})
    learner = make_learner(cfg, SPEC)
    state = learner.init_fn(jax.random.key(0))
    assert state.exploration.matrices.shape == (N_ENVS, 8, SPEC.action_dim)
    obs = jax.random.normal(jax.random.key(1), (N_ENVS, 3))
    first, _, _ = learner.acting.explore(state, obs, jax.random.key(2), jnp.zeros(N_ENVS, bool), jnp.float32(1.0))
    again, _, _ = learner.acting.explore(state, obs, jax.random.key(3), jnp.zeros(N_ENVS, bool), jnp.float32(1.0))
    np.testing.assert_array_equal(first, again)  # the held matrices, not the acting key, make the noise
    distribution, _ = state.policy.apply_fn({"params": state.policy.params}, obs)
    for env in range(N_ENVS):
        want = distribution.mean[env] + distribution.latent[env] @ state.exploration.matrices[env]
        np.testing.assert_allclose(first[env], want, rtol=1e-5)
    assert [learner.acting.resample_due(n) for n in range(9)] == [True, False, False, False, True] + [False] * 3 + [
        True
    ]
    resampled = learner.acting.resample(state)
    assert not np.allclose(resampled.exploration.matrices, state.exploration.matrices)
    only_at_start = make_learner(ppo_config(use_sde=True), SPEC).acting
    assert [only_at_start.resample_due(n) for n in range(5)] == [True, False, False, False, False]


def test_gsde_reads_and_writes_back_and_is_refused_on_discrete_actions():
    algorithm = get_algo("ppo")
    cfg = ppo_config(use_sde=True, sde_sample_freq=4)
    assert algorithm.build_config(algorithm.config_to_hyperparams(cfg), N_ENVS, "again") == cfg
    assert ppo_config(sde_sample_freq=4).sde_sample_freq == -1  # SB3 reads it only with use_sde
    with pytest.raises(ConfigError, match="use_sde: gSDE explores in continuous"):
        make_learner(cfg, EnvSpec(obs_dim=3, action_dim=1, n_actions=2))


def test_an_on_policy_rollout_is_scaled_on_the_host_as_vecnormalize_scales_it():
    """With normalize an on-policy learner acts on observations scaled on the host, and the rollout stages
    that array (rlbench.loop.run_state.LoopRun.policy_inputs): float32 with the float32 statistics the device
    uses elsewhere, to within an ulp of the device's own scaling; rewards as VecNormalize (float64)."""
    from rlbench.buffers.normalization import NormalizeConfig, normalize_obs
    from rlbench.envs.obs_normalizer import VecNormalizeStats

    rng = np.random.default_rng(0)
    stats = VecNormalizeStats.new(NormalizeConfig(clip_obs=3.0), n_seeds=2, n_envs=3, obs_dim=4)
    stats.observe_reset(rng.normal(2.0, 5.0, (2, 3, 4)))
    for _ in range(5):
        stats.observe_step(rng.normal(2.0, 5.0, (2, 3, 4)), rng.normal(0, 10, (2, 3)), rng.random((2, 3)) < 0.2)
    obs, reward = rng.normal(2.0, 20.0, (2, 3, 4)), rng.normal(0, 50, (2, 3))
    host_obs, host_reward = stats.scaled_obs(obs), stats.scaled_rewards(reward)
    device = stats.device()
    for seed in range(2):
        per_seed = jax.tree.map(lambda x, i=seed: x[i], device)
        want = (obs[seed] - stats.obs.mean[seed]) / np.sqrt(stats.obs.var[seed] + 1e-8)
        np.testing.assert_allclose(host_obs[seed], np.clip(want, -3, 3), rtol=1e-6, atol=1e-6)
        np.testing.assert_allclose(host_obs[seed], normalize_obs(obs[seed], per_seed), rtol=1e-6, atol=1e-7)
        want_reward = np.clip(reward[seed] / np.sqrt(stats.ret.var[seed] + 1e-8), -10, 10).astype(np.float32)
        np.testing.assert_array_equal(host_reward[seed], want_reward)
    assert np.abs(host_obs).max() == 3.0 and host_obs.dtype == np.float32
