"""DQN and QR-DQN: the targets, losses and epsilon schedule by hand; target updates counted as SB3 counts them;
epsilon-greedy acting and its warm-up; fused == unfused, vmapped == separate, traces once; the keys."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from rlbench.algos.common.seed_axis import SeedAxis
from rlbench.algos.common.steps import fuse_steps, set_learning_rate
from rlbench.algos.dqn.config import EpsilonSchedule
from rlbench.algos.dqn.update import (
    dqn_target,
    q_loss,
    q_step,
    quantile_loss,
    quantile_target,
    with_due_target_updates,
)
from rlbench.buffers.uniform import make_uniform_buffer
from rlbench.config.hyperparams import merge
from rlbench.config.registry import get_algo
from rlbench.errors import ConfigError
from rlbench.types import EnvSpec, Transition
from tests.variants import slow_variant

SPEC = EnvSpec(obs_dim=4, action_dim=1, n_actions=3)


def config(algo="dqn", n_envs=1, **overrides):
    spec = get_algo(algo)
    settings = {"batch_size": 16, "buffer_size": 256, "learning_starts": 0, "policy_kwargs": {"net_arch": [16, 16]}}
    if algo == "qrdqn":
        settings["policy_kwargs"]["n_quantiles"] = 5
    return spec.build_config(merge(spec.preset, settings, overrides), n_envs, algo)


def discrete_batches(key, n_steps, batch_size, n_actions=SPEC.n_actions):
    k = jax.random.split(key, 4)
    n = n_steps * batch_size
    flat = Transition(
        obs=jax.random.normal(k[0], (n, SPEC.obs_dim)),
        action=jax.random.randint(k[1], (n, 1), 0, n_actions).astype(jnp.float32),
        reward=jax.random.normal(k[2], (n,)),
        next_obs=jax.random.normal(k[3], (n, SPEC.obs_dim)),
        terminated=(jnp.arange(n) % 3 == 0).astype(jnp.float32),
    )
    return fuse_steps(flat, n_steps)


def leaves(tree):
    return [
        np.asarray(jax.random.key_data(x) if jnp.issubdtype(x.dtype, jax.dtypes.prng_key) else x)
        for x in jax.tree.leaves(tree)
    ]


def test_dqn_target_and_huber_loss_by_hand():
    next_q = jnp.array([[1.0, 3.0], [2.0, 0.0]])
    target = dqn_target(next_q, jnp.array([1.0, 0.5]), jnp.array([0.0, 1.0]), 0.9)
    np.testing.assert_allclose(target, [1.0 + 0.9 * 3.0, 0.5])  # max over a', no bootstrap on termination
    q = jnp.array([[1.0, 2.0], [3.0, 4.0]])
    loss, q_mean = q_loss(q, jnp.array([1, 0]), jnp.array([2.5, 0.0]))
    # Huber (delta 1): |2 - 2.5| = 0.5 -> 0.5 * 0.25; |3 - 0| = 3 -> 3 - 0.5
    np.testing.assert_allclose(loss, (0.125 + 2.5) / 2)
    np.testing.assert_allclose(q_mean, 2.5)


def test_quantile_target_takes_the_action_greedy_under_the_targets_mean():
    next_z = jnp.array([[[1.0, 0.0], [3.0, 5.0]]])  # [B=1, N=2, A=2]: means 2 (a0), 2.5 (a1)
    target = quantile_target(next_z, jnp.array([1.0]), jnp.array([0.0]), 0.5)
    np.testing.assert_allclose(target, [[1.0 + 0.5 * 0.0, 1.0 + 0.5 * 5.0]])
    terminal = quantile_target(next_z, jnp.array([1.0]), jnp.array([1.0]), 0.5)
    np.testing.assert_allclose(terminal, [[1.0, 1.0]])


def test_quantile_loss_is_sb3_contribs_sum_over_quantiles():
    rng = np.random.default_rng(0)
    batch, n, n_actions = 3, 4, 2
    z = rng.normal(size=(batch, n, n_actions)).astype(np.float32) * 2
    action = np.array([1, 0, 1])
    target = rng.normal(size=(batch, n)).astype(np.float32) * 2
    loss, _ = quantile_loss(jnp.asarray(z), jnp.asarray(action), jnp.asarray(target))
    tau = (np.arange(n) + 0.5) / n
    expected = 0.0
    for b in range(batch):
        for j in range(n):  # target atoms: averaged
            for i in range(n):  # current quantiles: summed
                delta = target[b, j] - z[b, i, action[b]]
                huber = 0.5 * delta**2 if abs(delta) <= 1 else abs(delta) - 0.5
                expected += abs(tau[i] - (delta < 0)) * huber
    np.testing.assert_allclose(loss, expected / (batch * n), rtol=1e-5)


def test_epsilon_schedule_at_its_ends_and_middle():
    schedule = EpsilonSchedule(fraction=0.1, initial=1.0, final=0.05)
    at = [float(schedule(jnp.float32(p))) for p in (1.0, 0.95, 0.9, 0.5, 0.0)]
    np.testing.assert_allclose(at, [1.0, 1.0 - 0.05 * 0.95 / 0.1, 0.05, 0.05, 0.05], rtol=1e-5)
    assert float(EpsilonSchedule(fraction=0.0, final=0.2)(jnp.float32(1.0))) == pytest.approx(0.2)


def moved_away(state):
    """The state with its Q-network's parameters moved off its target's."""
    return state.replace(q=state.q.replace(params=jax.tree.map(lambda p: p + 1.0, state.q.params)))


def test_target_updates_fall_due_every_interval_of_vector_steps():
    cfg = config(target_update_interval=4, n_envs=2)  # every 4 // 2 = 2 vector steps, as SB3 counts them
    assert cfg.target_interval_vector_steps == 2
    state = moved_away(get_algo("dqn").make_learner(cfg, SPEC).init_fn(jax.random.key(0)))
    early = with_due_target_updates(cfg, state.replace(exploration=jnp.int32(1)))
    assert int(early.target_updates) == 0
    for got, want in zip(leaves(early.q.target_params), leaves(state.q.target_params), strict=True):
        np.testing.assert_array_equal(got, want)
    due = with_due_target_updates(cfg, state.replace(exploration=jnp.int32(5)))
    assert int(due.target_updates) == 2
    for got, want in zip(leaves(due.q.target_params), leaves(state.q.params), strict=True):
        np.testing.assert_array_equal(got, want)
    again = with_due_target_updates(cfg, moved_away(due))  # nothing new fell due: the target stays
    for got, want in zip(leaves(again.q.target_params), leaves(due.q.target_params), strict=True):
        np.testing.assert_array_equal(got, want)


def test_soft_target_updates_apply_once_per_update_that_fell_due():
    cfg = config(target_update_interval=3, tau=0.5)
    state = moved_away(get_algo("dqn").make_learner(cfg, SPEC).init_fn(jax.random.key(0)))
    moved = with_due_target_updates(cfg, state.replace(exploration=jnp.int32(7)))  # steps 3 and 6: two updates
    for got, online, target in zip(
        leaves(moved.q.target_params), leaves(state.q.params), leaves(state.q.target_params), strict=True
    ):
        np.testing.assert_allclose(got, online + 0.25 * (target - online), rtol=1e-6, atol=1e-6)


def test_epsilon_greedy_warms_up_uniformly_then_follows_the_schedule():
    cfg = config(learning_starts=10, exploration_final_eps=0.0, exploration_fraction=0.5)
    learner = get_algo("dqn").make_learner(cfg, SPEC)
    state = learner.init_fn(jax.random.key(0))
    obs = jnp.tile(jax.random.normal(jax.random.key(1), (1, SPEC.obs_dim)), (3000, 1))  # one obs, many envs
    greedy = int(learner.acting.evaluate(state, obs[:1])[0, 0])
    explore = jax.jit(learner.acting.explore)
    starts = jnp.zeros(3000, bool)

    def share_greedy(counter, progress):
        action, counted, _ = explore(
            state.replace(exploration=jnp.int32(counter)), obs, jax.random.key(2), starts, progress
        )
        assert int(counted) == counter + 1  # the vector steps acted
        assert set(np.unique(np.asarray(action))) <= {0.0, 1.0, 2.0}
        return float(np.mean(np.asarray(action)[:, 0] == greedy))

    assert share_greedy(9, jnp.float32(0.0)) == pytest.approx(1 / 3, abs=0.04)  # warm-up: uniform whatever epsilon
    assert share_greedy(10, jnp.float32(0.0)) == 1.0  # after it, epsilon 0: greedy
    # epsilon 0.5 halfway through the fall: each env draws its own coin
    assert share_greedy(10, jnp.float32(0.75)) == pytest.approx(0.5 + 0.5 / 3, abs=0.04)
    assert set(np.asarray(learner.acting.evaluate(state, obs))[:, 0]) == {greedy}


@pytest.mark.parametrize("algo", ["dqn", slow_variant("qrdqn")])
def test_fused_steps_equal_steps_one_by_one(algo):
    cfg = config(algo, learning_rate="lin_1e-3")
    learner = get_algo(algo).make_learner(cfg, SPEC)
    state = learner.init_fn(jax.random.key(0)).replace(exploration=jnp.int32(50))
    batches = discrete_batches(jax.random.key(1), 3, cfg.batch_size)
    keys = jax.random.split(jax.random.key(2), 3)
    progress = jnp.float32(0.6)
    fused, metrics = jax.jit(learner.gradient_steps_fn)(state, batches, keys, progress, state.step)
    # By hand: the learning rate at 0.6 of lin_1e-3, the target updates due at 50 vector steps, then 3 q_steps.
    single = with_due_target_updates(cfg, state)
    single = single.replace(q=set_learning_rate(single.q, jnp.float32(6e-4)))
    losses = []
    for i in range(3):
        single, step_metrics = jax.jit(lambda s, b, k: q_step(cfg, s, b, k))(
            single, jax.tree.map(lambda x, i=i: x[i], batches), keys[i]
        )
        losses.append(float(step_metrics["train/loss"]))
    assert int(fused.step) == 3 and int(fused.target_updates) == 50 // cfg.target_interval_vector_steps
    for got, want in zip(leaves(fused.q), leaves(single.q), strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(metrics["train/loss"], np.mean(losses), rtol=1e-5)
    np.testing.assert_allclose(metrics["train/learning_rate"], 6e-4, rtol=1e-6)
    np.testing.assert_allclose(metrics["rollout/exploration_rate"], cfg.exploration_schedule(progress), rtol=1e-6)


def test_vmapped_update_equals_separate_updates_and_traces_once():
    cfg = config(gradient_steps=2)
    learner = get_algo("dqn").make_learner(cfg, SPEC)
    buffer = make_uniform_buffer(cfg.buffer_size, SPEC)
    axis = SeedAxis(3)
    per_seed, init = [], jax.jit(learner.init_fn)  # one trace: the seeds' states share their static fields
    for seed in range(3):
        prefill = jax.tree.map(lambda x: x[0], discrete_batches(jax.random.key(10 + seed), 1, 64))
        new = jax.tree.map(lambda x: x[0], discrete_batches(jax.random.key(20 + seed), 1, 4))
        state = init(jax.random.key(seed)).replace(exploration=jnp.int32(2000))
        per_seed.append((state, buffer.add_fn(buffer.init_fn(), prefill), new))
    stacked = [axis.stack(list(trees)) for trees in zip(*per_seed, strict=True)]
    traces = 0

    def counted(*args):
        nonlocal traces
        traces += 1
        return learner.update_fn(*args)

    vmapped = jax.jit(axis.map(counted, shared_argnums=(3, 4)))
    out = vmapped(*stacked, jnp.float32(0.9), jnp.int32(0))
    again = vmapped(*stacked, jnp.float32(0.8), jnp.int32(2))
    assert traces == 1 and again is not None
    for i, (state, buffer_state, new) in enumerate(per_seed):
        expected = jax.jit(learner.update_fn)(state, buffer_state, new, jnp.float32(0.9), jnp.int32(0))
        for got, want in zip(leaves(out), leaves(expected), strict=True):
            np.testing.assert_allclose(got[i], want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize(
    "algo,entry,message",
    [
        ("dqn", {"policy": "SimbaPolicy"}, r"policy: 'SimbaPolicy' is not supported; valid: MlpPolicy, CnnPolicy"),
        ("dqn", {"policy_kwargs": {"features_extractor_kwargs": {"features_dim": 64}}}, "only features_dim, for Cnn"),
        ("dqn", {"policy_kwargs": {"normalize_images": False}}, "normalize_images: only True"),
        ("dqn", {"exploration_final_eps": 1.5}, "exploration_final_eps"),
        ("dqn", {"tau": 0}, "tau"),
        ("dqn", {"policy_kwargs": {"n_quantiles": 5}}, "n_quantiles"),
        ("dqn", {"n_steps": 5}, "n_steps: a key of ppo, a2c; --algo dqn does not read it"),
        ("qrdqn", {"target_update_interval": 0}, "target_update_interval"),
    ],
)
def test_bad_keys_name_the_key(algo, entry, message):
    spec = get_algo(algo)
    with pytest.raises(ConfigError, match=message):
        spec.build_config(merge(spec.preset, entry), 1, "test")


def test_qrdqn_takes_sb3_contribs_defaults_and_rl_zoos_n_quantiles():
    cfg = get_algo("qrdqn").build_config({"policy_kwargs": {"n_quantiles": 10}}, 1, "test")
    assert cfg.n_quantiles == 10 and cfg.target_update_interval == 10000 and cfg.max_grad_norm is None
    assert cfg.q_network.hidden == (64, 64) and cfg.exploration_schedule.final == 0.01
    dqn = get_algo("dqn").build_config({}, 4, "test")
    assert dqn.n_quantiles is None and dqn.target_interval_vector_steps == 250 and dqn.max_grad_norm is None
