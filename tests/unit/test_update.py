"""The fused update: equivalence with single steps, one trace, policy delay, fixed temperature."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from rlbench.algos.common.fused import make_update
from rlbench.algos.common.seed_axis import SeedAxis
from rlbench.algos.common.steps import fuse_steps
from rlbench.algos.sac.update import make_learner
from rlbench.algos.soft.temperature import EntropyCoef
from rlbench.buffers.uniform import make_uniform_buffer
from rlbench.networks.mlp import NetworkConfig
from rlbench.types import EnvSpec, Transition
from tests.conftest import tiny_sac_config
from tests.variants import slow_variant

SPEC = EnvSpec(obs_dim=3, action_dim=2)


def random_batches(key, n_steps, batch_size):
    k = jax.random.split(key, 4)
    n = n_steps * batch_size
    flat = Transition(
        obs=jax.random.normal(k[0], (n, SPEC.obs_dim)),
        action=jax.random.uniform(k[1], (n, SPEC.action_dim), minval=-1, maxval=1),
        reward=jax.random.normal(k[2], (n,)),
        next_obs=jax.random.normal(k[3], (n, SPEC.obs_dim)),
        terminated=(jnp.arange(n) % 3 == 0).astype(jnp.float32),
    )
    return fuse_steps(flat, n_steps)  # [n_steps, B, ...]


def make(cfg):
    buffer = make_uniform_buffer(cfg.buffer_size, SPEC)
    return make_learner(cfg, SPEC), buffer


def initial_state(learner, seed=0):
    """A learner's state for `seed`, initialised in one compiled program (eagerly, each op compiles alone)."""
    return jax.jit(learner.init_fn)(jax.random.key(seed))


def leaves_close(a, b, tol=1e-6):
    for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b), strict=True):
        if jnp.issubdtype(x.dtype, jax.dtypes.prng_key):
            x, y = jax.random.key_data(x), jax.random.key_data(y)
        np.testing.assert_allclose(np.asarray(x), np.asarray(y), rtol=tol, atol=tol)


@pytest.mark.parametrize(
    "policy_delay,dropout,family",
    [
        (2, 0.1, "mlp"),
        slow_variant(1, 0.0, "mlp"),
        slow_variant(2, 0.0, "mlp"),
        slow_variant(1, 0.1, "mlp"),
        slow_variant(2, 0.1, "simba"),
    ],
)
def test_fused_equals_unfused(policy_delay, dropout, family):
    network = NetworkConfig(family=family, hidden=(8, 8), dropout_rate=dropout, layer_norm=dropout > 0)
    cfg = tiny_sac_config(
        policy_delay=policy_delay,
        actor=NetworkConfig(family=family, hidden=(8, 8)),
        critic=network,
        weight_decay=1e-4 if family == "simba" else None,
    )
    learner, _ = make(cfg)
    state = initial_state(learner)
    batches = random_batches(jax.random.key(1), 3, cfg.batch_size)
    keys = jax.random.split(jax.random.key(2), 3)
    progress = jnp.float32(0.7)
    steps = jax.jit(learner.gradient_steps_fn)
    fused, _ = steps(state, batches, keys, progress, state.step)
    single = state
    for i in range(3):
        one = jax.tree.map(lambda x, i=i: x[i : i + 1], batches)
        single, _ = steps(single, one, keys[i : i + 1], progress, single.step)
    assert int(fused.step) == 3
    leaves_close(fused, single)


@pytest.mark.parametrize("family", ["mlp", slow_variant("simba")])
def test_update_traces_once_over_changing_policy_delay_offsets(family):
    network = NetworkConfig(family=family, hidden=(8, 8))
    cfg = tiny_sac_config(policy_delay=3, gradient_steps=2, actor=network, critic=network)
    learner, buffer = make(cfg)
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
    for i in range(7):  # offsets step % 3 = 0, 2, 1, 0, ... all through one compiled call
        state, buffer_state, _ = update(state, buffer_state, new, jnp.asarray(1 - i / 7))
    assert n_traces == 1
    assert int(state.step) == 14


def test_actor_updates_only_every_policy_delay_steps():
    cfg = tiny_sac_config(policy_delay=3)
    learner, _ = make(cfg)
    state = initial_state(learner)
    steps = jax.jit(learner.gradient_steps_fn)
    batches = random_batches(jax.random.key(1), 6, cfg.batch_size)
    keys = jax.random.split(jax.random.key(2), 6)
    actor_steps, temperature_steps = [], []
    for i in range(6):
        one = jax.tree.map(lambda x, i=i: x[i : i + 1], batches)
        state, _ = steps(state, one, keys[i : i + 1], jnp.float32(1.0), state.step)
        actor_steps.append(int(state.actor.step))
        temperature_steps.append(int(state.temperature.step))
    # SB3/SBX count: the actor and temperature step on gradient steps 3 and 6.
    assert actor_steps == [0, 0, 1, 1, 1, 2]
    assert temperature_steps == actor_steps
    assert int(state.critic.step) == 6


def test_target_critic_follows_every_target_update_interval_steps():
    """tau 0.5, every 3rd gradient step: the target is averaged on steps 0 and 3 and kept on 1 and 2,
    t <- 0.5 * params + 0.5 * t, with `params` the critic right after that step's optimizer update."""
    cfg = tiny_sac_config(tau=0.5, target_update_interval=3)
    learner, _ = make(cfg)
    state = initial_state(learner)
    steps = jax.jit(learner.gradient_steps_fn)
    batches = random_batches(jax.random.key(1), 5, cfg.batch_size)
    keys = jax.random.split(jax.random.key(2), 5)
    expected = state.critic.target_params
    for i in range(5):
        one = jax.tree.map(lambda x, i=i: x[i : i + 1], batches)
        state, _ = steps(state, one, keys[i : i + 1], jnp.float32(1.0), state.step)
        if i % 3 == 0:
            expected = jax.tree.map(lambda p, t: 0.5 * p + 0.5 * t, state.critic.params, expected)
        leaves_close(state.critic.target_params, expected)
    fused, _ = steps(initial_state(learner), batches, keys, jnp.float32(1.0), jnp.int32(0))
    leaves_close(fused, state)
    # Two seeds on the runner's seed axis (vmapped, the step counter batched): each as its own single run.
    axis = SeedAxis(2)
    stacked = axis.init(jax.jit(learner.init_fn), [jax.random.key(0), jax.random.key(1)])
    both = axis.stack([batches, batches])
    vmapped, _ = jax.jit(axis.map(learner.gradient_steps_fn, shared_argnums=(2, 3, 4)))(
        stacked, both, keys, jnp.float32(1.0), jnp.int32(0)
    )
    leaves_close(axis.take(vmapped, 0), fused)


def test_n_steps_runs_the_first_steps_of_one_compiled_scan():
    """A varying number of gradient steps (train_freq in episodes) runs in scans of one length: with n_steps
    only the first n_steps run, exactly as a scan of that length; the same program serves every count."""
    cfg = tiny_sac_config(policy_delay=2)
    learner, _ = make(cfg)
    state = initial_state(learner)
    batches = random_batches(jax.random.key(1), 4, cfg.batch_size)
    keys = jax.random.split(jax.random.key(2), 4)
    n_traces = 0

    def counted(state, n_steps):
        nonlocal n_traces
        n_traces += 1
        return learner.gradient_steps_fn(state, batches, keys, jnp.float32(1.0), state.step, n_steps)

    some, one_step = jax.jit(counted), jax.jit(learner.gradient_steps_fn)
    single, per_step = state, []  # the steps one at a time: state and metrics after each
    for i in range(4):
        one = jax.tree.map(lambda x, i=i: x[i : i + 1], batches)
        single, metrics = one_step(single, one, keys[i : i + 1], jnp.float32(1.0), single.step)
        per_step.append((single, metrics))
    for n in (3, 1, 4):
        partial, metrics = some(state, jnp.int32(n))
        assert int(partial.step) == n
        leaves_close(partial, per_step[n - 1][0])
        for name in ("train/critic_loss", "train/actor_loss"):  # averaged over the steps that ran
            values = np.array([float(m[name]) for _, m in per_step[:n]])  # NaN: no actor step (policy delay 2)
            expected = np.nan if np.isnan(values).all() else np.nanmean(values)
            np.testing.assert_allclose(metrics[name], expected, rtol=1e-5)
    assert n_traces == 1


def test_fixed_entropy_coefficient_has_no_parameter_and_stays_fixed():
    cfg = tiny_sac_config(ent_coef=EntropyCoef(initial=0.05, learned=False))
    learner, _ = make(cfg)
    state = initial_state(learner)
    assert state.temperature is None
    state, metrics = jax.jit(learner.gradient_steps_fn)(
        state, random_batches(jax.random.key(1), 2, 4), jax.random.split(jax.random.key(2), 2), jnp.float32(1), 0
    )
    np.testing.assert_allclose(metrics["train/ent_coef"], 0.05, rtol=1e-6)


def test_the_temperature_loss_setting_is_the_loss_the_update_takes():
    """One gradient step from alpha 0.5 with `temperature_loss: alpha` (as -params gives it): the reported
    temperature loss is alpha * (H - H_target), not SB3's log(alpha) * (H - H_target), with H the step's mean
    entropy and H_target -dim(A) = -2, both as the step reports them."""
    from rlbench.config.algorithms.sac import build_config

    cfg = build_config({"temperature_loss": "alpha", "ent_coef": "auto_0.5", "batch_size": 4}, 1, "test")
    cfg = tiny_sac_config(temperature_loss=cfg.temperature_loss, ent_coef=cfg.ent_coef)
    learner, _ = make(cfg)
    _, metrics = jax.jit(learner.gradient_steps_fn)(
        initial_state(learner), random_batches(jax.random.key(1), 1, 4), jax.random.split(jax.random.key(2), 1), 1.0, 0
    )
    alpha, entropy = float(metrics["train/ent_coef"]), float(metrics["train/entropy"])
    np.testing.assert_allclose(alpha, 0.5, rtol=1e-6)
    np.testing.assert_allclose(metrics["train/ent_coef_loss"], alpha * (entropy + 2.0), rtol=1e-5)
    assert not np.isclose(float(metrics["train/ent_coef_loss"]), np.log(alpha) * (entropy + 2.0))


def test_learned_temperature_starts_at_initial_value():
    cfg = tiny_sac_config(ent_coef=EntropyCoef(initial=0.1, learned=True))
    state = initial_state(make(cfg)[0])
    np.testing.assert_allclose(jnp.exp(state.temperature.params["log_alpha"]), 0.1, rtol=1e-6)


def test_linear_learning_rate_follows_progress():
    from rlbench.algos.common.schedules import LinearSchedule

    cfg = tiny_sac_config(learning_rate=LinearSchedule(1e-3))
    learner, _ = make(cfg)
    state = initial_state(learner)
    state, metrics = jax.jit(learner.gradient_steps_fn)(
        state, random_batches(jax.random.key(1), 1, 4), jax.random.split(jax.random.key(2), 1), jnp.float32(0.25), 0
    )
    np.testing.assert_allclose(metrics["train/learning_rate"], 2.5e-4, rtol=1e-6)
    np.testing.assert_allclose(state.actor.opt_state.hyperparams["learning_rate"], 2.5e-4, rtol=1e-6)
