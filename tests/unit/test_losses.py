"""Losses against values worked out by hand."""

import jax
import jax.numpy as jnp
import numpy as np

from rlbench.algos.common.losses import actor_loss, critic_loss, soft_td_target, temperature_loss
from rlbench.networks.actor import log_one_minus_tanh_squared, sample_action


def test_soft_td_target_by_hand():
    next_q = jnp.array([[2.0, 5.0], [3.0, 4.0]])  # [n_critics=2, B=2]
    y = soft_td_target(
        next_q,
        next_log_prob=jnp.array([0.4, 0.0]),
        reward=jnp.ones(2),
        terminated=jnp.array([0.0, 1.0]),
        alpha=jnp.array(0.5),
        gamma=0.9,
    )
    # b=0: 1 + 0.9 * (min(2, 3) - 0.5 * 0.4) = 1 + 0.9 * 1.8 = 2.62 ; b=1: terminated -> r = 1.0
    np.testing.assert_allclose(y, [2.62, 1.0], rtol=1e-6)


def test_soft_td_target_has_no_gradient():
    grad = jax.grad(lambda q: soft_td_target(q, jnp.zeros(1), jnp.ones(1), jnp.zeros(1), jnp.array(0.1), 0.99).sum())(
        jnp.ones((2, 1))
    )
    np.testing.assert_array_equal(grad, 0.0)


def test_critic_loss_by_hand():
    q = jnp.array([[1.0, 2.0], [0.0, 4.0]])
    target = jnp.array([1.0, 1.0])
    # critic 0: mean((0, 1)^2) = 0.5 ; critic 1: mean((1, 9)) = 5 ; 0.5 * (0.5 + 5) = 2.75
    np.testing.assert_allclose(critic_loss(q, target), 2.75, rtol=1e-6)


def test_actor_loss_by_hand():
    log_prob = jnp.array([-1.0, 0.5])
    q = jnp.array([[3.0, 1.0], [2.0, 4.0]])  # min over critics: [2, 1]
    # mean(0.2 * -1 - 2, 0.2 * 0.5 - 1) = mean(-2.2, -0.9) = -1.55
    np.testing.assert_allclose(actor_loss(log_prob, q.min(axis=0), jnp.array(0.2)), -1.55, rtol=1e-6)


def test_temperature_loss_sign_raises_alpha_when_entropy_is_low():
    # Entropy 1 below the target: descent on log alpha must increase it.
    grad_low = jax.grad(temperature_loss)(jnp.array(0.0), jnp.array([-2.0, -2.0]), -1.0)
    assert grad_low < 0  # d/dlog_alpha = mean(H - H_target) = -1
    np.testing.assert_allclose(grad_low, -1.0)
    grad_high = jax.grad(temperature_loss)(jnp.array(0.0), jnp.array([0.5, 1.5]), -1.0)
    np.testing.assert_allclose(grad_high, 2.0)  # entropy above target: alpha goes down


def test_temperature_loss_on_alpha_has_alpha_times_the_gradient_in_log_alpha():
    """Issue 35 item 3: SB3's loss log(alpha) * (H - H_target) and SBX's before 0.18, -alpha * (log_prob + H_target)
    = alpha * (H - H_target), by hand: alpha 0.5, entropies [-2, -1] (mean -1.5), target -1, so H - H_target = -0.5."""
    log_alpha, entropy = jnp.log(jnp.array(0.5)), jnp.array([-2.0, -1.0])
    on_log_alpha = temperature_loss(log_alpha, entropy, -1.0, "log_alpha")
    on_alpha = temperature_loss(log_alpha, entropy, -1.0, "alpha")
    np.testing.assert_allclose(on_log_alpha, np.log(0.5) * -0.5, rtol=1e-6)  # 0.34657
    np.testing.assert_allclose(on_alpha, -0.25, rtol=1e-6)  # -0.5 * mean(log_prob + target) = -0.5 * mean(1, 0)
    grad_log_alpha = jax.grad(temperature_loss)(log_alpha, entropy, -1.0, "log_alpha")
    grad_alpha = jax.grad(temperature_loss)(log_alpha, entropy, -1.0, "alpha")
    np.testing.assert_allclose(grad_log_alpha, -0.5, rtol=1e-6)  # H - H_target
    np.testing.assert_allclose(grad_alpha, -0.25, rtol=1e-6)  # alpha * (H - H_target): the factor alpha
    assert temperature_loss(log_alpha, entropy, -1.0) == on_log_alpha  # SB3's is the default


def test_squashed_log_prob_matches_change_of_variables():
    mean, log_std = jnp.array([[0.3, -0.2]]), jnp.array([[-0.5, 0.1]])
    action, log_prob = sample_action(mean, log_std, jax.random.key(3))
    u = jnp.arctanh(action)
    std = jnp.exp(log_std)
    gauss = -0.5 * ((u - mean) / std) ** 2 - jnp.log(std) - 0.5 * jnp.log(2 * jnp.pi)
    expected = (gauss - jnp.log(1 - action**2)).sum(-1)
    np.testing.assert_allclose(log_prob, expected, rtol=1e-4)
    assert jnp.all(jnp.abs(action) < 1)


def test_log_one_minus_tanh_squared_is_stable():
    u = jnp.array([0.0, 1.0, 30.0, -30.0])
    direct = jnp.log(1 - jnp.tanh(u[:2]) ** 2)
    np.testing.assert_allclose(log_one_minus_tanh_squared(u)[:2], direct, rtol=1e-5)
    assert jnp.all(jnp.isfinite(log_one_minus_tanh_squared(u)))
