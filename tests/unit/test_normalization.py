"""RL Zoo's `normalize` (SB3's VecNormalize): the running statistics against a direct numpy computation on
a recorded stream of real env steps, the scaling of a sampled replay batch inside the jitted update, and
the parsing of the hyperparameter (RL Zoo's gamma rule, unknown arguments refused by name)."""

import jax
import numpy as np
import pytest

from rlbench.algos.common.fused import make_update
from rlbench.algos.sac.update import make_learner
from rlbench.buffers.normalization import NormalizeConfig, normalize_obs
from rlbench.buffers.uniform import make_uniform_buffer
from rlbench.config.entry import parse_normalize
from rlbench.envs.make import close_vector_env, env_spec, make_vector_env
from rlbench.envs.obs_normalizer import VecNormalizeStats
from rlbench.errors import ConfigError
from rlbench.run.experiment import RunRequest, resolve
from rlbench.types import Transition
from tests.conftest import tiny_sac_config
from tests.unit.test_update import initial_state

COUNT_EPSILON = 1e-4  # SB3's RunningMeanStd prior: mean 0, variance 1, weight 1e-4


def prior_weighted_moments(samples: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Mean and variance of `samples` [n, ...] pooled with a pseudo-sample of weight 1e-4, mean 0 and
    variance 1: what the running merge must equal, computed at once."""
    samples = np.asarray(samples, np.float64)
    weight = COUNT_EPSILON + len(samples)
    mean = samples.sum(axis=0) / weight
    m_2 = COUNT_EPSILON * (1.0 + mean**2) + ((samples - mean) ** 2).sum(axis=0)
    return mean, m_2 / weight


def record_stream(n_seeds, n_envs, steps):
    """Real Pendulum steps under uniform random actions, episodes of 30 steps: the first observations
    [n_seeds, n_envs, 3], then per vector step the returned observations, rewards and episode ends."""
    env = make_vector_env("Pendulum-v1", n_seeds * n_envs, "dummy", {"max_episode_steps": 30})
    rng = np.random.default_rng(0)
    try:
        first = env.reset(seed=list(range(n_seeds * n_envs)))[0].reshape(n_seeds, n_envs, -1)
        stream = []
        for _ in range(steps):
            action = rng.uniform(-1, 1, (n_seeds * n_envs, 1)).astype(np.float32)
            obs, reward, terminated, truncated, _ = env.step(action)
            by_seed = (x.reshape(n_seeds, n_envs, *x.shape[1:]) for x in (obs, reward, terminated | truncated))
            stream.append(tuple(by_seed))
    finally:
        close_vector_env(env, failed=False)
    return first, stream


def test_running_statistics_equal_numpy_on_a_recorded_stream():
    n_seeds, n_envs, gamma = 2, 3, 0.9
    first, stream = record_stream(n_seeds, n_envs, steps=75)  # 2 episode ends per env
    stats = VecNormalizeStats.new(NormalizeConfig(gamma=gamma), n_seeds, n_envs, obs_dim=3)
    stats.observe_reset(first)
    for obs, reward, done in stream:
        stats.observe_step(obs, reward, done)

    returns, discounted = [], np.zeros((n_seeds, n_envs))
    for _, reward, done in stream:
        discounted = discounted * gamma + reward
        returns.append(discounted.copy())
        discounted[done] = 0.0  # a new episode's return starts from 0
    assert sum(done.sum() for _, _, done in stream) == 2 * n_seeds * n_envs
    for seed in range(n_seeds):  # each seed its own statistics
        observations = np.concatenate([first[seed], *(obs[seed] for obs, _, _ in stream)])  # [76 * n_envs, 3]
        mean, var = prior_weighted_moments(observations)
        np.testing.assert_allclose(stats.obs.mean[seed], mean, rtol=1e-12)
        np.testing.assert_allclose(stats.obs.var[seed], var, rtol=1e-12)
        assert stats.obs.count[seed] == pytest.approx(COUNT_EPSILON + len(observations), rel=1e-15)
        mean, var = prior_weighted_moments(np.concatenate([r[seed] for r in returns]))
        np.testing.assert_allclose([stats.ret.mean[seed], stats.ret.var[seed]], [mean, var], rtol=1e-12)
        np.testing.assert_array_equal(stats.returns[seed], discounted[seed])

    # As the device applies them: clip((obs - mean) / sqrt(var + 1e-8), -10, 10), in float32.
    obs = stream[-1][0]
    scaled = jax.jit(jax.vmap(normalize_obs))(obs.astype(np.float32), stats.device())  # over the seeds
    expected = np.clip((obs - stats.obs.mean[:, None]) / np.sqrt(stats.obs.var[:, None] + 1e-8), -10, 10)
    np.testing.assert_allclose(scaled, expected, rtol=1e-5, atol=1e-6)


def test_one_env_merges_bit_for_bit_as_numpy_and_the_frozen_statistics_follow_every_step():
    """One env (RL Zoo's MuJoCo PPO entries): a batch of one skips numpy's mean and var, whose values for one
    sample are the sample and 0 exactly; the statistics equal the general merge bit for bit. device() is kept
    between steps and made again once they move."""
    first, stream = record_stream(2, 1, steps=40)
    stats = VecNormalizeStats.new(NormalizeConfig(gamma=0.9), 2, 1, obs_dim=3)
    stats.observe_reset(first)
    mean, var, count = np.zeros((2, 3)), np.ones((2, 3)), np.full(2, COUNT_EPSILON)
    for obs, reward, done in stream:
        frozen = stats.device()
        assert stats.device() is frozen  # nothing moved
        stats.observe_step(obs, reward, done)
        assert stats.device() is not frozen
        np.testing.assert_array_equal(stats.device().obs_mean, stats.obs.mean.astype(np.float32))
    for obs in [first, *(obs for obs, _, _ in stream)]:  # the general merge, numpy's mean and var of one row
        batch = np.asarray(obs, np.float64)
        delta, total = batch.mean(axis=1) - mean, count[:, None] + 1
        mean = mean + delta / total
        var = (var * count[:, None] + batch.var(axis=1) + np.square(delta) * count[:, None] / total) / total
        count = count + 1
    np.testing.assert_array_equal(stats.obs.mean, mean)
    np.testing.assert_array_equal(stats.obs.var, var)


def test_scaled_observations_are_kept_for_the_same_array_until_the_statistics_move():
    """The host loop scales the observations it acts on and stages the same array: asked again, scaled_obs
    returns its last result; another array, or the same after the statistics moved, is scaled anew, and
    every result equals the formula on the float32 statistics."""
    first, stream = record_stream(2, 3, steps=3)
    stats = VecNormalizeStats.new(NormalizeConfig(clip_obs=1.5), 2, 3, obs_dim=3)
    stats.observe_reset(first)

    def by_hand(obs: np.ndarray) -> np.ndarray:
        frozen = stats.device()
        return np.clip((obs.astype(np.float32) - frozen.obs_mean[:, None]) / frozen.obs_std[:, None], -1.5, 1.5)

    obs, reward, done = stream[0]
    scaled = stats.scaled_obs(obs)
    assert stats.scaled_obs(obs) is scaled
    np.testing.assert_array_equal(scaled, by_hand(obs))
    other = obs.copy()
    assert stats.scaled_obs(other) is not scaled  # another array, equal values: scaled anew, to the same values
    np.testing.assert_array_equal(stats.scaled_obs(other), scaled)
    stats.observe_step(obs, reward, done)
    moved = stats.scaled_obs(obs)
    assert not np.array_equal(moved, scaled)
    np.testing.assert_array_equal(moved, by_hand(obs))


def test_only_the_return_statistics_move_without_norm_obs():
    """As SB3: norm_obs=False leaves the observation statistics at their prior; the return's still move."""
    first, stream = record_stream(1, 1, steps=5)
    stats = VecNormalizeStats.new(NormalizeConfig(norm_obs=False), 1, 1, obs_dim=3)
    stats.observe_reset(first)
    for obs, reward, done in stream:
        stats.observe_step(obs, reward, done)
    assert (stats.obs.mean == 0).all() and (stats.obs.var == 1).all() and stats.obs.count[0] == COUNT_EPSILON
    assert stats.ret.count[0] == pytest.approx(5 + COUNT_EPSILON) and stats.ret.var[0] != 1
    assert stats.device().obs_mean is None and stats.device().reward_std is not None


def test_the_update_scales_the_sampled_batch_with_the_current_statistics():
    """The buffer keeps the original transitions; the update's batch is clip((obs - mean) / std) and
    clip(reward / std), computed in numpy from the same statistics."""
    cfg = tiny_sac_config(batch_size=8, gradient_steps=2)
    env = make_vector_env("Pendulum-v1", 1, "dummy", {})
    spec = env_spec(env)
    close_vector_env(env, failed=False)
    buffer = make_uniform_buffer(cfg.buffer_size, spec)
    rng = np.random.default_rng(1)
    n = 40
    new = Transition(
        obs=rng.normal(3.0, 2.0, (n, 3)).astype(np.float32),
        action=rng.uniform(-1, 1, (n, 1)).astype(np.float32),
        reward=rng.normal(-5.0, 4.0, n).astype(np.float32),
        next_obs=rng.normal(3.0, 2.0, (n, 3)).astype(np.float32),
        terminated=np.zeros(n, np.float32),
    )
    stats = VecNormalizeStats.new(NormalizeConfig(clip_obs=1.5, clip_reward=2.0), 1, 20, obs_dim=3)
    stats.observe_reset(new.obs[None, :20])  # as if 20 envs had collected them
    stats.observe_step(new.obs[None, 20:], new.reward[None, :20], np.zeros((1, 20), bool))
    normalization = jax.tree.map(lambda x: x[0], stats.device())

    def sampled_batches(state, batches, keys, progress_remaining, first_step, n_steps=None):  # the gradient steps
        return state, {"obs": batches.obs, "next_obs": batches.next_obs, "reward": batches.reward}

    update = jax.jit(make_update(cfg, buffer, sampled_batches))
    state = initial_state(make_learner(cfg, spec))
    progress, first_step = np.float32(1.0), np.int32(0)
    _, _, raw = update(state, buffer.init_fn(), new, progress, first_step)
    _, buffer_state, scaled = update(state, buffer.init_fn(), new, progress, first_step, normalization)

    std = np.sqrt(stats.obs.var[0] + 1e-8)
    for name in ("obs", "next_obs"):
        expected = np.clip((np.asarray(raw[name], np.float64) - stats.obs.mean[0]) / std, -1.5, 1.5)
        np.testing.assert_allclose(scaled[name], expected, rtol=1e-5, atol=1e-6)
    reward = np.clip(np.asarray(raw["reward"], np.float64) / np.sqrt(stats.ret.var[0] + 1e-8), -2.0, 2.0)
    np.testing.assert_allclose(scaled["reward"], reward, rtol=1e-5, atol=1e-6)
    for name, clip in (("obs", 1.5), ("reward", 2.0)):  # some values clipped, not all
        assert (np.abs(scaled[name]) == clip).any() and (np.abs(scaled[name]) < clip).any()
    np.testing.assert_array_equal(buffer_state.rows[:n, :3], new.obs)  # stored as collected


@pytest.mark.parametrize(
    "value,algo_gamma,expected",
    [
        (True, None, NormalizeConfig()),
        (False, 0.9, None),
        (None, None, None),
        # As RL Zoo: the entry's gamma is the return's discount, over the dict's.
        (True, 0.95, NormalizeConfig(gamma=0.95)),
        ({"norm_obs": True, "norm_reward": False, "gamma": 0.9}, 0.98, NormalizeConfig(norm_reward=False, gamma=0.98)),
        ({"gamma": 0.9, "clip_obs": 5, "epsilon": 1e-6}, None, NormalizeConfig(gamma=0.9, clip_obs=5.0, epsilon=1e-6)),
    ],
)
def test_normalize_spellings(value, algo_gamma, expected):
    assert parse_normalize(value, algo_gamma, "test") == expected


@pytest.mark.parametrize(
    "value,message",
    [
        ({"norm_obs": True, "clip": 5.0}, r"normalize: unknown argument 'clip'.*did you mean 'clip_obs'"),
        ({"training": False}, r"normalize: unknown argument 'training'"),
        ({"norm_obs_keys": ["a"]}, r"normalize: unknown argument 'norm_obs_keys'"),
        ({"norm_reward": 1}, r"normalize.norm_reward: expected True or False"),
        ({"clip_obs": 0}, r"normalize.clip_obs: 0.0 is out of range"),
        ({"gamma": 1.0}, r"normalize.gamma: 1.0 is out of range"),
        ("yes", r"normalize: expected true, false or dict"),
    ],
)
def test_bad_normalize_values_are_refused_by_name(value, message):
    with pytest.raises(ConfigError, match=message):
        parse_normalize(value, None, "test")


def test_a_file_entry_resolves_to_the_run_config_and_the_saved_spelling(tmp_path):
    """From an RL Zoo file (a string dict, gamma set by the entry) to RunConfig.normalize and config.yml."""
    conf = tmp_path / "sac.yml"
    conf.write_text(
        "Pendulum-v1:\n  n_timesteps: 300\n  gamma: 0.98\n  learning_starts: 100\n"
        '  normalize: "dict(norm_obs=True, norm_reward=False, gamma=0.5)"\n'
    )
    exp = resolve(RunRequest(env="Pendulum-v1", conf_file=str(conf), verbose=0, log_folder=str(tmp_path / "l")))
    assert exp.run.normalize == NormalizeConfig(norm_reward=False, gamma=0.98)
    saved = exp.hyperparams["normalize"]
    assert saved == {
        "norm_obs": True,
        "norm_reward": False,
        "clip_obs": 10.0,
        "clip_reward": 10.0,
        "gamma": 0.98,
        "epsilon": 1e-8,
    }
    assert parse_normalize(saved, None, "config.yml") == exp.run.normalize  # read back as written
    with pytest.raises(ConfigError, match=r"normalize: unknown argument 'norm'"):
        resolve(RunRequest(env="Pendulum-v1", conf_file=str(conf), params=("normalize:dict(norm=True)",)))
