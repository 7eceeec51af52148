"""CrossQ: BatchRenorm against a NumPy reference, the joint forward pass, no target network; DroQ dropout."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from rlbench.algos.common.fused import make_update
from rlbench.algos.crossq.update import make_learner as make_crossq
from rlbench.algos.sac.update import make_learner as make_sac
from rlbench.algos.soft import acting
from rlbench.buffers.uniform import make_uniform_buffer
from rlbench.networks.batch_renorm import BatchRenorm
from rlbench.networks.mlp import NetworkConfig
from rlbench.types import EnvSpec
from tests.conftest import tiny_crossq_config, tiny_sac_config
from tests.unit.test_update import initial_state, leaves_close, random_batches
from tests.variants import slow_variant

SPEC = EnvSpec(obs_dim=3, action_dim=2)
EPS, R_MAX, D_MAX, MOMENTUM = 1e-3, 3.0, 5.0, 0.99


def reference_batch_renorm(x, running_mean, running_var, steps, warmup, scale=1.0, bias=0.0):
    """The formulas of rlbench/networks/batch_renorm.py's docstring, in NumPy (float64)."""
    m_b, v_b = x.mean(0), x.var(0)
    std_b, std_r = np.sqrt(v_b + EPS), np.sqrt(running_var + EPS)
    r = np.clip(std_b / std_r, 1 / R_MAX, R_MAX)
    d = np.clip((m_b - running_mean) / std_r, -D_MAX, D_MAX)
    if steps >= warmup:
        mean, var = m_b - d * np.sqrt(v_b) / r, v_b / r**2
    else:
        mean, var = m_b, v_b
    y = (x - mean) / np.sqrt(var + EPS) * scale + bias
    new_mean = MOMENTUM * running_mean + (1 - MOMENTUM) * m_b
    new_var = MOMENTUM * running_var + (1 - MOMENTUM) * v_b
    return y, new_mean, new_var


def renorm_variables(layer, x, running_mean, running_var, steps):
    variables = jax.jit(layer.init, static_argnums=2)(jax.random.key(0), x, False)
    stats = {
        "mean": jnp.asarray(running_mean, jnp.float32),
        "var": jnp.asarray(running_var, jnp.float32),
        "steps": jnp.asarray(steps, jnp.int32),
    }
    return {"params": variables["params"], "batch_stats": stats}


@pytest.mark.parametrize("steps,warmup", [(3, 10), (10, 10), (50, 10)])
def test_batch_renorm_matches_reference(steps, warmup):
    rng = np.random.default_rng(0)
    x = rng.normal(2.0, 3.0, (64, 4)).astype(np.float32)
    # Running statistics far from the batch's, so r and d are clipped in some features after warm-up.
    running_mean = np.array([0.0, 2.0, 30.0, -40.0], np.float32)
    running_var = np.array([1.0, 9.0, 0.01, 400.0], np.float32)
    layer = BatchRenorm(warmup_steps=warmup)
    y, updates = layer.apply(
        renorm_variables(layer, x, running_mean, running_var, steps), x, True, mutable=["batch_stats"]
    )
    y_ref, mean_ref, var_ref = reference_batch_renorm(x.astype(np.float64), running_mean, running_var, steps, warmup)
    np.testing.assert_allclose(y, y_ref, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(updates["batch_stats"]["mean"], mean_ref, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(updates["batch_stats"]["var"], var_ref, rtol=1e-5, atol=1e-6)
    assert int(updates["batch_stats"]["steps"]) == steps + 1


def test_batch_renorm_clipping_is_active_after_warmup():
    # Same batch, warmed up or not: the outputs must differ when r or d are away from 1 and 0.
    x = np.random.default_rng(1).normal(5.0, 1.0, (32, 2)).astype(np.float32)
    layer = BatchRenorm(warmup_steps=5)
    out = [
        layer.apply(renorm_variables(layer, x, [0.0, 0.0], [1.0, 1.0], s), x, True, mutable=["batch_stats"])[0]
        for s in (4, 5)
    ]
    assert not np.allclose(out[0], out[1])
    np.testing.assert_allclose(np.asarray(out[0]).mean(0), 0.0, atol=1e-4)  # warm-up: plain batch norm


@pytest.mark.parametrize("steps", [3, 10])  # in warm-up, and after it (warmup 10)
def test_batch_renorm_gradients_stay_finite_for_a_feature_constant_over_the_batch(steps):
    # A unit off for every sample (batch variance exactly 0): sqrt's infinite derivative at 0 made this
    # column's input gradient NaN, which reached the layers below (the CrossQ actor of a one-observation
    # env turned NaN). The other columns' gradients are untouched by it.
    x = np.random.default_rng(3).normal(size=(16, 3)).astype(np.float32)
    x[:, 1] = 0.0
    layer = BatchRenorm(warmup_steps=10)
    variables = renorm_variables(layer, x, [0.5, 0.0, -0.5], [2.0, 1.0, 0.5], steps)
    weights = jnp.asarray(np.random.default_rng(4).normal(size=(16, 3)), jnp.float32)

    def loss(inputs):
        return (layer.apply(variables, inputs, True, mutable=["batch_stats"])[0] * weights).sum()

    grad = jax.jit(jax.grad(loss))  # one compilation, not one per operation
    grads = np.asarray(grad(x))
    assert np.isfinite(grads).all(), grads
    varied = x.copy()
    varied[:, 1] = 1e-3 * np.arange(16)
    without = np.asarray(grad(varied))
    np.testing.assert_allclose(grads[:, [0, 2]], without[:, [0, 2]], rtol=1e-5, atol=1e-6)


def test_batch_renorm_evaluation_uses_running_statistics_and_updates_nothing():
    x = np.random.default_rng(2).normal(size=(16, 3)).astype(np.float32)
    layer = BatchRenorm()
    variables = renorm_variables(layer, x, [1.0, -1.0, 0.5], [4.0, 0.25, 1.0], 7)
    y = layer.apply(variables, x, False)
    expected = (x - np.array([1.0, -1.0, 0.5])) / np.sqrt(np.array([4.0, 0.25, 1.0]) + EPS)
    np.testing.assert_allclose(y, expected, rtol=1e-5, atol=1e-5)


def crossq_config(**overrides):
    bn = dict(batch_norm=True, renorm_warmup_steps=2)
    values = dict(policy_delay=2, actor=NetworkConfig(hidden=(8, 8), **bn), critic=NetworkConfig(hidden=(8, 8), **bn))
    values.update(overrides)
    return tiny_crossq_config(**values)


def crossq_learner(cfg):
    return make_crossq(cfg, SPEC)


def test_joint_pass_keeps_statistics_of_the_concatenated_batch_and_no_target():
    learner = crossq_learner(crossq_config())
    state = initial_state(learner)
    assert not hasattr(state.critic, "target_params")
    batches = random_batches(jax.random.key(1), 1, 4)
    batches = batches._replace(next_obs=batches.next_obs + 10.0)  # next states far from states
    new_state, _ = jax.jit(learner.gradient_steps_fn)(
        state, batches, jax.random.split(jax.random.key(2), 1), jnp.float32(1), 0
    )
    # The first BatchRenorm sees concat([obs, action]); its first obs_dim features depend on obs only.
    input_mean = new_state.critic.batch_stats["critics"]["trunk"]["BatchRenorm_0"]["mean"][:, : SPEC.obs_dim]
    joint = np.concatenate([batches.obs[0], batches.next_obs[0]])
    expected = 0.01 * joint.mean(0)  # from the initial running mean 0, momentum 0.99
    for member in np.asarray(input_mean):  # each critic of the ensemble
        np.testing.assert_allclose(member, expected, rtol=1e-5)
        assert not np.allclose(member, 0.01 * np.asarray(batches.obs[0]).mean(0))
        assert not np.allclose(member, 0.01 * np.asarray(batches.next_obs[0]).mean(0))


def test_batch_renorm_counters_critic_per_step_actor_per_actor_update():
    learner = crossq_learner(crossq_config(policy_delay=3))
    state = initial_state(learner)
    state, metrics = jax.jit(learner.gradient_steps_fn)(
        state, random_batches(jax.random.key(1), 6, 4), jax.random.split(jax.random.key(2), 6), jnp.float32(1), 0
    )
    critic_steps = state.critic.batch_stats["critics"]["trunk"]["BatchRenorm_0"]["steps"]
    actor_steps = state.actor.batch_stats["trunk"]["BatchRenorm_0"]["steps"]
    np.testing.assert_array_equal(critic_steps, [6, 6])  # one joint training pass per gradient step
    assert int(actor_steps) == 2  # actor updates on gradient steps 3 and 6
    assert float(metrics["train/critic_bn_steps"]) == 3.5  # averaged over the 6 steps: mean(1..6)


@pytest.mark.parametrize("dropout", [0.0, slow_variant(0.05)])
def test_crossq_fused_equals_unfused_with_batch_stats(dropout):
    cfg = crossq_config(
        critic=NetworkConfig(hidden=(8, 8), batch_norm=True, renorm_warmup_steps=2, dropout_rate=dropout)
    )
    learner = crossq_learner(cfg)
    state = initial_state(learner)
    batches = random_batches(jax.random.key(1), 4, cfg.batch_size)
    keys = jax.random.split(jax.random.key(2), 4)
    steps = jax.jit(learner.gradient_steps_fn)
    fused, _ = steps(state, batches, keys, jnp.float32(1), 0)
    single = state
    for i in range(4):
        one = jax.tree.map(lambda x, i=i: x[i : i + 1], batches)
        single, _ = steps(single, one, keys[i : i + 1], jnp.float32(1), single.step)
    leaves_close(fused, single, tol=1e-5)


def test_crossq_update_traces_once():
    cfg = crossq_config(policy_delay=3, gradient_steps=2)
    buffer = make_uniform_buffer(cfg.buffer_size, SPEC)
    learner = make_crossq(cfg, SPEC)
    update_fn = make_update(cfg, buffer, learner.gradient_steps_fn)
    n_traces = 0

    def counted(state, buffer_state, new, progress):
        nonlocal n_traces
        n_traces += 1
        return update_fn(state, buffer_state, new, progress, state.step)

    update = jax.jit(counted, donate_argnums=(0, 1))
    # A jitted init (as the runner's) and a weakly typed progress: a state whose types changed after
    # one update would trace (and compile) the update a second time.
    state, buffer_state = initial_state(learner), buffer.init_fn()
    new = jax.tree.map(lambda x: x[0], random_batches(jax.random.key(1), 1, 4))
    for i in range(5):
        state, buffer_state, _ = update(state, buffer_state, new, jnp.asarray(1 - i / 5))
    assert n_traces == 1 and int(state.step) == 10


def test_droq_dropout_changes_training_outputs_and_evaluation_repeats():
    cfg = tiny_sac_config(critic=NetworkConfig(hidden=(16, 16), dropout_rate=0.2, layer_norm=True))
    learner = make_sac(cfg, SPEC)
    state = initial_state(learner)
    from rlbench.algos.soft.learner import make_networks

    critic = make_networks(cfg, SPEC).critic
    obs, action = jnp.ones((5, 3)), jnp.zeros((5, 2))
    variables = {"params": state.critic.params}

    @functools.partial(jax.jit, static_argnums=1)  # one compilation per mode, not one per operation
    def q(key, dropout):
        return critic.apply(variables, obs, action, dropout=dropout, rngs={"dropout": key})

    train_a, train_b = q(jax.random.key(1), True), q(jax.random.key(2), True)
    assert not np.allclose(train_a, train_b)
    np.testing.assert_array_equal(q(jax.random.key(1), False), q(jax.random.key(2), False))
    act = jax.jit(acting.act_deterministic)
    np.testing.assert_array_equal(act(state, obs), act(state, obs))
    layer_names = set(state.critic.params["critics"]["trunk"])
    assert {"LayerNorm_0", "LayerNorm_1"} <= layer_names
