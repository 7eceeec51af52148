"""PPO's and A2C's core (issue 45): GAE against a plain loop, the losses and entropies by hand, the epochs'
coverage, target_kl's stop, fused == looped, traces once, A2C's gradient, and a bandit that learns."""

import dataclasses
import math
from dataclasses import replace

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from rlbench.algos.common.schedules import ConstantSchedule
from rlbench.algos.common.steps import set_learning_rate
from rlbench.algos.ppo.config import PPOConfig, a2c_config, make_optimizer, minibatch_size
from rlbench.algos.ppo.gae import generalized_advantages
from rlbench.algos.ppo.losses import (
    Minibatch,
    approx_kl,
    clipped_surrogate_loss,
    explained_variance,
    normalized,
    ppo_loss,
    value_loss,
)
from rlbench.algos.ppo.state import init_state
from rlbench.algos.ppo.update import (
    StepCarry,
    epoch_keys,
    epoch_minibatches,
    loss_settings,
    make_update,
    minibatch_step,
    rollout_samples,
)
from rlbench.buffers.rollout import RolloutState, RolloutStep
from rlbench.config.registry import get_algo
from rlbench.networks.actor_critic import ActorCritic, ActorCriticNetConfig
from rlbench.networks.distributions import Categorical, DiagGaussian
from rlbench.types import EnvSpec
from tests.ppo_rollouts import add_step, init_rollout, sample_for_rollout

OBS_DIM, ACTION_DIM, N_ENVS = 3, 2, 2
SPEC = EnvSpec(OBS_DIM, ACTION_DIM)
TINY_NET = ActorCriticNetConfig(pi=(8, 8), vf=(8, 8))


# --- GAE ---------------------------------------------------------------------------------------------


def sb3_gae_loop(steps: RolloutStep, last_value, last_done, gamma, gae_lambda):
    """SB3's compute_returns_and_advantage, written as SB3 stores a rollout: the truncation bootstrap
    folded into the reward while collecting, episode ends as next steps' episode_starts."""
    rewards, values = np.array(steps.reward), np.array(steps.value)
    terminated, truncated, final_value = (np.array(x) for x in (steps.terminated, steps.truncated, steps.final_value))
    n_steps, n_envs = rewards.shape
    dones = np.maximum(terminated, truncated)
    advantages = np.zeros_like(rewards)
    for env in range(n_envs):
        for t in range(n_steps):  # collect_rollouts: rewards[idx] += gamma * terminal_value
            if truncated[t, env] and not terminated[t, env]:
                rewards[t, env] += gamma * final_value[t, env]
        last_gae = 0.0
        for t in reversed(range(n_steps)):
            if t == n_steps - 1:
                next_non_terminal, next_value = 1.0 - last_done[env], last_value[env]
            else:
                next_non_terminal, next_value = 1.0 - dones[t, env], values[t + 1, env]
            delta = rewards[t, env] + gamma * next_value * next_non_terminal - values[t, env]
            last_gae = delta + gamma * gae_lambda * next_non_terminal * last_gae
            advantages[t, env] = last_gae
    return advantages, advantages + values


def hand_rollout() -> tuple[RolloutStep, jnp.ndarray]:
    """4 steps x 2 envs. Env 0 terminates at t=1 and is truncated at t=2 (V(final obs) = 5); env 1 runs
    on. The value at t=2 of env 0 is 100: a GAE reading the next episode's first state across the
    termination would show it, and so would one bootstrapping the truncation from t=3's value (7)."""
    z = jnp.zeros((4, 2))
    steps = RolloutStep(
        obs=jnp.zeros((4, 2, OBS_DIM)),
        action=jnp.zeros((4, 2, ACTION_DIM)),
        reward=jnp.array([[1.0, 0.5], [2.0, 0.5], [3.0, 0.5], [4.0, 0.5]]),
        terminated=z.at[1, 0].set(1.0),
        truncated=z.at[2, 0].set(1.0),
        final_value=z.at[2, 0].set(5.0),
        value=jnp.array([[0.5, 1.0], [1.5, 1.0], [100.0, 1.0], [7.0, 1.0]]),
        log_prob=z,
    )
    return steps, jnp.array([2.0, 3.0])  # V(last obs) of each env


def test_gae_matches_sb3_loop_with_a_termination_a_truncation_and_two_envs():
    steps, last_value = hand_rollout()
    gamma, gae_lambda = 0.9, 0.8
    got = jax.jit(generalized_advantages, static_argnums=(2, 3))(steps, last_value, gamma, gae_lambda)
    want_advantages, want_returns = sb3_gae_loop(steps, last_value, np.zeros(2), gamma, gae_lambda)
    np.testing.assert_allclose(got.advantages, want_advantages, rtol=1e-6)
    np.testing.assert_allclose(got.returns, want_returns, rtol=1e-6)
    # By hand, env 0: t=2 truncated: 3 + 0.9 * 5 - 100 = -92.5 (neither 7 nor A_3 enters);
    # t=1 terminated: 2 - 1.5 = 0.5; t=3: 4 + 0.9 * 2 - 7 = -1.2.
    np.testing.assert_allclose(got.advantages[1:, 0], [0.5, -92.5, -1.2], rtol=1e-6)
    # t=0: delta 1 + 0.9 * 1.5 - 0.5 = 1.85; A = 1.85 + 0.9 * 0.8 * 0.5 = 2.21
    np.testing.assert_allclose(got.advantages[0, 0], 2.21, rtol=1e-6)


def test_gae_matches_sb3_loop_on_random_rollouts():
    keys = jax.random.split(jax.random.key(3), 5)
    shape = (16, 3)
    steps = RolloutStep(
        obs=jnp.zeros((*shape, 1)),
        action=jnp.zeros((*shape, 1)),
        reward=jax.random.normal(keys[0], shape),
        terminated=(jax.random.uniform(keys[1], shape) < 0.15).astype(jnp.float32),
        truncated=(jax.random.uniform(keys[2], shape) < 0.15).astype(jnp.float32),
        final_value=jax.random.normal(keys[3], shape),
        value=jax.random.normal(keys[4], shape),
        log_prob=jnp.zeros(shape),
    )
    last_value = jnp.array([0.3, -1.0, 2.0])
    last_done = np.maximum(steps.terminated[-1], steps.truncated[-1])  # the last step's end is its own done flag
    got = generalized_advantages(steps, last_value, 0.99, 0.95)
    want, _ = sb3_gae_loop(steps, last_value, last_done, 0.99, 0.95)
    np.testing.assert_allclose(got.advantages, want, rtol=1e-5, atol=1e-5)


# --- losses and distributions by hand -----------------------------------------------------------------


def test_clipped_surrogate_by_hand():
    ratio = jnp.array([0.5, 1.0, 1.5, 0.5])
    advantage = jnp.array([1.0, -1.0, 2.0, -1.0])
    # min(r A, clip(r, 0.8, 1.2) A): min(0.5, 0.8) = 0.5; -1; min(3, 2.4) = 2.4; min(-0.5, -0.8) = -0.8
    # loss = -(0.5 - 1 + 2.4 - 0.8) / 4 = -0.275
    np.testing.assert_allclose(clipped_surrogate_loss(ratio, advantage, jnp.array(0.2)), -0.275, rtol=1e-6)


def test_value_loss_clipped_and_not_by_hand():
    value, old_value, returns = jnp.array([1.0, 3.0]), jnp.array([2.0, 2.0]), jnp.array([0.0, 4.0])
    # unclipped: ((0 - 1)^2 + (4 - 3)^2) / 2 = 1
    np.testing.assert_allclose(value_loss(value, old_value, returns, None), 1.0, rtol=1e-6)
    # clipped to old +- 0.5: predictions 1.5, 2.5: (1.5^2 + 1.5^2) / 2 = 2.25 (SB3: no max with the unclipped)
    np.testing.assert_allclose(value_loss(value, old_value, returns, jnp.array(0.5)), 2.25, rtol=1e-6)


def test_approx_kl_normalization_and_explained_variance_by_hand():
    # log r = (ln 2, 0): ((2 - 1) - ln 2 + 0) / 2
    np.testing.assert_allclose(approx_kl(jnp.array([math.log(2.0), 0.0])), (1 - math.log(2.0)) / 2, rtol=1e-6)
    # mean 2, PyTorch's unbiased std 1 (ddof 0 would give +-1.2247)
    np.testing.assert_allclose(normalized(jnp.array([1.0, 2.0, 3.0])), [-1.0, 0.0, 1.0], rtol=1e-6)
    # Var[target] = 2/3, Var[target - predicted] = Var[(0, 0, 1)] = 2/9: 1 - (2/9) / (2/3) = 2/3
    np.testing.assert_allclose(explained_variance(jnp.array([1.0, 2.0, 2.0]), jnp.array([1.0, 2.0, 3.0])), 2 / 3)
    assert np.isnan(explained_variance(jnp.zeros(3), jnp.ones(3)))


def test_gaussian_log_prob_and_entropy_closed_forms():
    dist = DiagGaussian(mean=jnp.array([[0.0, 1.0]]), log_std=jnp.array([0.0, math.log(2.0)]))
    # H = sum_i log(sigma_i sqrt(2 pi e)) = log sqrt(2 pi e) + log(2 sqrt(2 pi e))
    np.testing.assert_allclose(dist.entropy(), [math.log(2 * math.pi * math.e) + math.log(2.0)], rtol=1e-6)
    # log N(1; 0, 1) + log N(0; 1, 2) = (-0.5 - log sqrt(2 pi)) + (-1/8 - log 2 - log sqrt(2 pi))
    expected = -0.5 - 0.125 - math.log(2.0) - math.log(2 * math.pi)
    np.testing.assert_allclose(dist.log_prob(jnp.array([[1.0, 0.0]])), [expected], rtol=1e-6)
    assert dist.mode().tolist() == [[0.0, 1.0]]


def test_categorical_log_prob_and_entropy_closed_forms():
    dist = Categorical(logits=jnp.log(jnp.array([[0.5, 0.25, 0.25], [0.25, 0.25, 0.5]])) + 3.0)  # shift: no effect
    # H(1/2, 1/4, 1/4) = 1/2 ln 2 + 2 * 1/4 ln 4 = 1.5 ln 2
    np.testing.assert_allclose(dist.entropy(), [1.5 * math.log(2.0)] * 2, rtol=1e-6)
    np.testing.assert_allclose(dist.log_prob(jnp.array([1, 2])), [math.log(0.25), math.log(0.5)], rtol=1e-6)
    assert dist.mode().tolist() == [0, 2]


def test_orthogonal_init_has_sb3_gains_and_log_std_init():
    net = ActorCritic(ActorCriticNetConfig(pi=(16,), vf=(16,), log_std_init=-0.5), action_dim=2, discrete=False)
    params = net.init(jax.random.key(0), jnp.zeros((1, 4)))["params"]
    first = params["pi"]["OrthoDense_0"]["Dense_0"]["kernel"]  # [4, 16]: orthogonal rows of norm sqrt(2)
    np.testing.assert_allclose(first @ first.T, 2.0 * np.eye(4), atol=1e-5)
    head = params["action_head"]["Dense_0"]["kernel"]  # [16, 2]: orthogonal columns of norm 0.01
    np.testing.assert_allclose(head.T @ head, 1e-4 * np.eye(2), atol=1e-9)
    value = params["value_head"]["Dense_0"]["kernel"]
    np.testing.assert_allclose(jnp.linalg.norm(value), 1.0, rtol=1e-5)
    np.testing.assert_array_equal(params["pi"]["OrthoDense_0"]["Dense_0"]["bias"], 0.0)
    np.testing.assert_array_equal(params["log_std"], -0.5)


# --- the update ---------------------------------------------------------------------------------------


def collected_rollout(cfg: PPOConfig, state, discrete=False, seed=0) -> RolloutState:
    """n_steps x N_ENVS steps acted by `state` on random observations, with a termination and a truncation."""
    rollout = init_rollout(cfg.n_steps, N_ENVS, OBS_DIM, () if discrete else (ACTION_DIM,))
    key = jax.random.key(seed)
    for t in range(cfg.n_steps):
        rollout, key = collect_step(state, rollout, key, t)
    return rollout


@jax.jit
def collect_step(state, rollout: RolloutState, key, t) -> tuple[RolloutState, jax.Array]:
    """One step of collected_rollout, compiled once (op by op, the rollouts cost these tests seconds each)."""
    key, obs_key, act_key, reward_key = jax.random.split(key, 4)
    obs = jax.random.normal(obs_key, (N_ENVS, OBS_DIM))
    acted = sample_for_rollout(state, obs, act_key)
    end = jnp.stack([jnp.where(t == 2, 1.0, 0.0), jnp.float32(0.0)])
    step = RolloutStep(
        obs,
        acted.action,
        jax.random.normal(reward_key, (N_ENVS,)),
        end,
        end[::-1],
        jnp.ones(N_ENVS),
        acted.value,
        acted.log_prob,
    )
    return add_step(rollout, step, obs + 1.0), key


def compiled_samples(cfg: PPOConfig, policy, rollout: RolloutState) -> Minibatch:
    """rollout_samples compiled (the tests' op-by-op calls were most of their time)."""
    return jax.jit(lambda policy, rollout: rollout_samples(cfg, policy, rollout))(policy, rollout)


def ppo_setup(**overrides):
    cfg = PPOConfig(**{"n_steps": 8, "batch_size": 4, "n_epochs": 3, "ent_coef": 0.01, **overrides})
    state = init_state(cfg, ActorCritic(TINY_NET, ACTION_DIM, discrete=False), SPEC, jax.random.key(1))
    return cfg, state, collected_rollout(cfg, state)


def test_each_epoch_covers_every_sample_exactly_once_in_a_fresh_order():
    n = 12
    flat = Minibatch(*(jnp.arange(n, dtype=jnp.float32) + 100.0 * i for i in range(6)))
    _, keys = epoch_keys(jax.random.key(0), 2)
    orders = []
    for key in keys:
        minibatches = epoch_minibatches(flat, key, n_minibatches=3)
        assert minibatches.advantage.shape == (3, 4)
        order = np.asarray(minibatches.obs).reshape(-1)
        assert sorted(order.tolist()) == list(range(n))  # every sample once
        np.testing.assert_array_equal(np.asarray(minibatches.returns).reshape(-1), order + 500.0)  # rows intact
        orders.append(order)
    assert orders[0].tolist() != orders[1].tolist()


def test_one_minibatch_per_epoch_is_taken_in_rollout_order_and_updates_as_a_shuffled_one(monkeypatch):
    """batch_size = the rollout (RL Zoo's CartPole-v1 entry): the epoch's one minibatch is the rollout in its
    own order, no permutation drawn (each costs a sort of the rollout per epoch); its gradient is the same
    mean over the same samples, so the update equals one through the shuffled minibatch up to rounding."""
    cfg, state, rollout = ppo_setup(n_steps=4, batch_size=8, learning_rate=ConstantSchedule(1e-2))
    permutations = []
    drawn = jax.random.permutation
    monkeypatch.setattr(jax.random, "permutation", lambda *a, **k: permutations.append(a) or drawn(*a, **k))
    jax.make_jaxpr(make_update(cfg, N_ENVS))(state, rollout, jnp.float32(1.0))
    assert permutations == []
    jax.make_jaxpr(make_update(dataclasses.replace(cfg, batch_size=4), N_ENVS))(state, rollout, jnp.float32(1.0))
    assert len(permutations) == 1  # two minibatches: shuffled (traced once, in the epochs' scan)
    monkeypatch.undo()
    flat = compiled_samples(cfg, state.policy, rollout)
    in_order = epoch_minibatches(flat, None, 1, 8)
    np.testing.assert_array_equal(np.asarray(in_order.obs[0]), np.asarray(flat.obs))
    updated, _ = jax.jit(make_update(cfg, N_ENVS))(state, rollout, jnp.float32(1.0))
    settings = loss_settings(cfg, jnp.float32(1.0))
    step = jax.jit(lambda carry, batch: minibatch_step(cfg, settings, carry, batch))
    carry = StepCarry(policy=state.policy, going=jnp.array(True), steps_taken=jnp.zeros((), jnp.int32))
    shuffled_order = carry
    for key in epoch_keys(state.key, cfg.n_epochs)[1]:
        shuffled = epoch_minibatches(flat, key, 1, 8)
        assert np.asarray(shuffled.obs[0]).tolist() != np.asarray(flat.obs).tolist()
        shuffled_order, _ = step(shuffled_order, jax.tree.map(lambda x: x[0], shuffled))
    assert int(updated.step) == cfg.n_epochs
    assert_params_close(updated.policy.params, shuffled_order.policy.params, tol=1e-5)


def test_batch_size_fits_in_the_rollout():
    assert minibatch_size(PPOConfig(batch_size=4), 16) == 4 and minibatch_size(a2c_config(), 10) == 10
    assert minibatch_size(PPOConfig(batch_size=5), 16) == 5  # a last minibatch of 1 (SB3's)
    with pytest.raises(ValueError, match="must be in"):
        minibatch_size(PPOConfig(batch_size=17), 16)


def test_a_batch_size_that_does_not_divide_ends_each_epoch_with_sb3s_smaller_minibatch():
    """10 samples in minibatches of 4: SB3 takes permutation[0:4], [4:8], [8:10]. The fused epoch pads the last
    to 4 with weight 0, and its loss (advantage normalization included) is the loss of its 2 samples alone."""
    cfg, state, rollout = ppo_setup(n_steps=5, batch_size=4)
    flat = compiled_samples(cfg, state.policy, rollout)  # 5 steps x 2 envs
    key = jax.random.key(9)
    minibatches = epoch_minibatches(flat, key, 3, 4)
    order = np.asarray(jax.random.permutation(key, 10))
    np.testing.assert_array_equal(np.asarray(minibatches.weight), [[1] * 4, [1] * 4, [1, 1, 0, 0]])
    last = jax.tree.map(lambda x: x[2], minibatches)
    alone = jax.tree.map(lambda x: x[order[8:]], flat)
    np.testing.assert_array_equal(last.advantage[:2], alone.advantage)
    settings = loss_settings(cfg, jnp.float32(1.0))
    loss = jax.jit(lambda params, batch: ppo_loss(params, state.policy.apply_fn, batch, settings))
    padded_loss, padded_metrics = loss(state.policy.params, last)
    alone_loss, alone_metrics = loss(state.policy.params, alone)
    np.testing.assert_allclose(padded_loss, alone_loss, rtol=1e-6)
    for name in alone_metrics:
        np.testing.assert_allclose(padded_metrics[name], alone_metrics[name], rtol=1e-5, atol=1e-7, err_msg=name)
    grad = jax.jit(jax.grad(lambda p, b: loss(p, b)[0]))
    assert_params_close(grad(state.policy.params, last), grad(state.policy.params, alone), tol=1e-5)
    update = jax.jit(make_update(cfg, N_ENVS))
    updated, metrics = update(state, rollout, jnp.float32(1.0))
    assert int(metrics["train/n_updates"]) == cfg.n_epochs and int(updated.step) == 3 * cfg.n_epochs


def looped_update(cfg: PPOConfig, state, rollout, progress):
    """The update as SB3's Python loops over epochs and minibatches, calling the same minibatch step."""
    policy = set_learning_rate(state.policy, cfg.learning_rate(jnp.float32(progress)))
    flat = rollout_samples(cfg, policy, rollout)
    settings = loss_settings(cfg, jnp.asarray(progress))
    n_minibatches = cfg.n_steps * N_ENVS // cfg.batch_size
    step = jax.jit(lambda carry, batch: minibatch_step(cfg, settings, carry, batch))
    carry = StepCarry(policy=policy, going=jnp.array(True), steps_taken=jnp.zeros((), jnp.int32))
    _, keys = epoch_keys(state.key, cfg.n_epochs)
    kls = []
    for key in keys:
        minibatches = epoch_minibatches(flat, key, n_minibatches)
        for i in range(n_minibatches):
            carry, (metrics, _) = step(carry, jax.tree.map(lambda x, i=i: x[i], minibatches))
            kls.append(float(metrics["train/approx_kl"]))
            if not bool(carry.going):
                return carry, kls
    return carry, kls


def assert_params_close(a, b, tol=1e-6):
    for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b), strict=True):
        np.testing.assert_allclose(x, y, rtol=tol, atol=tol)


def test_fused_epochs_equal_the_python_loop():
    cfg, state, rollout = ppo_setup(learning_rate=ConstantSchedule(1e-2))
    fused, metrics = jax.jit(make_update(cfg, N_ENVS))(state, rollout, jnp.float32(1.0))
    looped, kls = looped_update(cfg, state, rollout, 1.0)
    assert int(fused.step) == int(looped.steps_taken) == 3 * 4 and int(fused.n_updates) == 3
    assert_params_close(fused.policy.params, looped.policy.params)
    np.testing.assert_allclose(metrics["train/approx_kl"], np.mean(kls[-4:]), rtol=1e-5)  # the last epoch's


def test_target_kl_stops_where_the_loop_stops():
    # The loop without a limit gives each minibatch's approx_kl; a limit between the running maximum
    # before step k and step k's value must stop the update just before step k's gradient step.
    cfg, state, rollout = ppo_setup(learning_rate=ConstantSchedule(3e-2))
    _, kls = looped_update(cfg, state, rollout, 1.0)
    k = next(i for i in range(5, len(kls)) if kls[i] > max(kls[:i]))
    cfg, _, _ = ppo_setup(learning_rate=ConstantSchedule(3e-2), target_kl=(max(kls[:k]) + kls[k]) / 2 / 1.5)
    fused, _ = jax.jit(make_update(cfg, N_ENVS))(state, rollout, jnp.float32(1.0))
    looped, _ = looped_update(cfg, state, rollout, 1.0)
    assert int(fused.step) == int(looped.steps_taken) == k
    assert int(fused.n_updates) == k // 4 + 1  # the epoch it stopped in counts, as SB3's
    assert_params_close(fused.policy.params, looped.policy.params)


def test_target_kl_stop_at_a_constructed_minibatch():
    """With a zero learning rate the policy never moves, so each minibatch's approx_kl is fixed by the
    rollout's old log-probs: shifted by -1 on exactly the samples of epoch 1's minibatch 2, that
    minibatch's approx_kl is e - 2 = 0.718, every earlier one's is below it."""
    cfg, state, rollout = ppo_setup(learning_rate=ConstantSchedule(0.0))
    flat_index = jnp.arange(cfg.n_steps * N_ENVS)
    _, keys = epoch_keys(state.key, cfg.n_epochs)
    hot = jax.random.permutation(keys[1], flat_index.shape[0])[8:12]  # epoch 1, minibatch 2 (batch 4)
    shift = jnp.zeros(flat_index.shape[0]).at[hot].set(-1.0).reshape(N_ENVS, cfg.n_steps).T  # env-major
    rollout = rollout.replace(steps=rollout.steps._replace(log_prob=rollout.steps.log_prob + shift))
    earlier = [
        float(jnp.mean(jnp.isin(jax.random.permutation(keys[e], 16)[4 * m : 4 * m + 4], hot)))
        for e, m in [(0, 0), (0, 1), (0, 2), (0, 3), (1, 0), (1, 1)]
    ]
    assert max(earlier) < 1.0  # no earlier minibatch holds all four shifted samples
    limit = (max(earlier) * (math.e - 2) + (math.e - 2)) / 2  # between the largest earlier kl and e - 2
    cfg = dataclasses.replace(cfg, target_kl=limit / 1.5)
    fused, metrics = jax.jit(make_update(cfg, N_ENVS))(state, rollout, jnp.float32(1.0))
    assert int(fused.step) == 4 + 2 and int(fused.n_updates) == 2
    np.testing.assert_allclose(metrics["train/approx_kl"], (math.e - 2) / 3, rtol=1e-5)  # epoch 1: 0, 0, e - 2


def test_update_traces_once():
    cfg, state, rollout = ppo_setup()
    update_fn = make_update(cfg, N_ENVS)
    n_traces = 0

    def counted(state, rollout, progress):
        nonlocal n_traces
        n_traces += 1
        return update_fn(state, rollout, progress)

    update = jax.jit(counted, donate_argnums=0)
    state = jax.jit(lambda key: init_state(cfg, ActorCritic(TINY_NET, ACTION_DIM, False), SPEC, key))(jax.random.key(1))
    for i in range(3):
        state, _ = update(state, rollout, jnp.asarray(1 - i / 3))  # weakly typed progress, as a loop passes it
    assert n_traces == 1 and int(state.step) == 3 * 3 * 4


def test_a2c_gradient_equals_the_plain_a2c_loss_gradient():
    cfg = a2c_config(ent_coef=0.01, vf_coef=0.25)
    net = ActorCritic(TINY_NET, ACTION_DIM, discrete=False)
    state = init_state(cfg, net, SPEC, jax.random.key(2))
    rollout = collected_rollout(cfg, state)
    flat = compiled_samples(cfg, state.policy, rollout)
    settings = loss_settings(cfg, jnp.float32(1.0))

    def a2c_loss(params):  # SB3's A2C.train
        distribution, value = net.apply({"params": params}, flat.obs)
        policy_loss = -(flat.advantage * distribution.log_prob(flat.action)).mean()
        return policy_loss + cfg.vf_coef * ((flat.returns - value) ** 2).mean() - 0.01 * distribution.entropy().mean()

    want = jax.jit(jax.grad(a2c_loss))(state.policy.params)
    got = jax.jit(jax.grad(lambda p: ppo_loss(p, net.apply, flat, settings)[0]))(state.policy.params)
    assert_params_close(got, want, tol=1e-5)
    # ... and the update is one step of that gradient through PyTorch-style RMSprop
    updated, _ = jax.jit(make_update(cfg, N_ENVS))(state, rollout, jnp.float32(1.0))
    tx = make_optimizer(cfg)
    step, _ = tx.update(want, tx.init(state.policy.params), state.policy.params)
    assert int(updated.step) == 1
    assert_params_close(updated.policy.params, optax.apply_updates(state.policy.params, step), tol=1e-5)


def test_rmsprop_divides_by_sqrt_v_plus_eps_as_pytorch():
    cfg = a2c_config(max_grad_norm=1e9)
    tx = make_optimizer(cfg)
    g = {"w": jnp.array([1e-6, 1.0])}
    update, _ = tx.update(g, tx.init(g))
    v = 0.01 * g["w"] ** 2  # (1 - alpha) g^2 from v0 = 0
    np.testing.assert_allclose(update["w"], -7e-4 * g["w"] / (jnp.sqrt(v) + 1e-5), rtol=1e-5)
    # eps inside the sqrt (optax's default) would give -7e-4 * 1e-6 / sqrt(1e-14 + 1e-5), about 300x smaller
    assert abs(float(update["w"][0])) > 10 * 7e-4 * 1e-6 / math.sqrt(1e-14 + 1e-5)


def test_rmsprop_tf_like_starts_v_at_one_and_adds_eps_inside_the_sqrt_as_sb3s():
    """SB3's RMSpropTFLike (RL Zoo's A2C atari entry), two steps by hand: v = alpha v + (1 - alpha) g^2 from v0 = 1,
    then -lr g / sqrt(v + eps)."""
    keys = {"policy_kwargs": {"optimizer_class": "RMSpropTFLike", "optimizer_kwargs": {"eps": 1e-5}}}
    cfg = replace(get_algo("a2c").build_config(keys, 16, "test"), max_grad_norm=1e9)
    tx = make_optimizer(cfg)
    g = {"w": jnp.array([1e-3, 2.0])}
    opt_state, v = tx.init(g), np.ones(2)
    for _ in range(2):
        update, opt_state = tx.update(g, opt_state)
        v = 0.99 * v + 0.01 * np.asarray(g["w"]) ** 2
        np.testing.assert_allclose(update["w"], -7e-4 * np.asarray(g["w"]) / np.sqrt(v + 1e-5), rtol=1e-5)


def test_ppo_learns_a_one_step_bandit():
    """Two actions, reward 1 for action 1, every step terminal: P(action 1) goes from 1/2 to near 1."""
    cfg = PPOConfig(n_steps=16, batch_size=16, n_epochs=4, learning_rate=ConstantSchedule(3e-3))
    net = ActorCritic(TINY_NET, action_dim=2, discrete=True)
    state = init_state(cfg, net, SPEC, jax.random.key(0))
    update = jax.jit(make_update(cfg, N_ENVS))
    obs = jnp.ones((N_ENVS, OBS_DIM))

    @jax.jit
    def collect(state, key):
        def act(rollout, step_key):
            acted = sample_for_rollout(state, obs, step_key)
            ones = jnp.ones(N_ENVS)
            step = RolloutStep(
                obs,
                acted.action,
                acted.action.astype(jnp.float32),
                ones,
                0 * ones,
                0 * ones,
                acted.value,
                acted.log_prob,
            )
            return add_step(rollout, step, obs), None

        empty = init_rollout(cfg.n_steps, N_ENVS, OBS_DIM, (), jnp.int32)
        return jax.lax.scan(act, empty, jax.random.split(key, cfg.n_steps))[0]

    def p_right(state):
        return float(jax.nn.softmax(net.apply({"params": state.policy.params}, obs[:1])[0].logits)[0, 1])

    assert abs(p_right(state) - 0.5) < 0.01
    for i in range(15):
        state, _ = update(state, collect(state, jax.random.key(100 + i)), jnp.float32(1.0))
    assert p_right(state) > 0.95
