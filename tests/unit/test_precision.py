"""Mixed precision: bfloat16 products with float32 accumulation, and the plain-layout backward pass."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from rlbench.algos.crossq.update import make_learner as make_crossq
from rlbench.algos.sac.update import make_learner as make_sac
from rlbench.networks.mlp import NetworkConfig
from rlbench.networks.plain_layout import PlainLayoutDense, dense_pair, transposed_kernels
from rlbench.networks.trunk import make_trunk
from rlbench.store.learner_state import state_from_bytes, state_to_bytes
from tests.conftest import tiny_crossq_config, tiny_sac_config
from tests.unit.test_td3 import learner_of, td3_config
from tests.unit.test_update import SPEC, initial_state, random_batches
from tests.variants import slow_variant


def relative_error(a, b) -> float:
    return float(optax.tree.norm(jax.tree.map(jnp.subtract, a, b)) / optax.tree.norm(b))


def test_bfloat16_products_round_operands_and_accumulate_in_float32():
    # 1 + 2**-10 is not a bfloat16 (8 bits of mantissa): it rounds to 1. The 512 products of 1 * 1 sum
    # to 512 exactly in float32; a bfloat16 accumulator would stall at 256 (256 + 1 rounds to 256).
    x = jnp.full((1, 512), 1 + 2**-10, jnp.float32)
    params = {"params": {"kernel": jnp.ones((512, 1)), "bias": jnp.zeros((1,))}}
    out = PlainLayoutDense(1).apply(params, x)
    assert out.dtype == jnp.float32 and float(out[0, 0]) == 512.0
    assert float((x @ jnp.ones((512, 1)))[0, 0]) == pytest.approx(512.5)  # float32 keeps the 2**-10


def test_dense_pair_gradients_are_as_accurate_as_autodiff_in_bfloat16():
    kx, kw, kb = jax.random.split(jax.random.key(0), 3)
    x = jax.random.normal(kx, (32, 24))
    kernel = jax.random.normal(kw, (24, 16)) / 5
    bias = jax.random.normal(kb, (16,))
    target = jnp.sin(jnp.arange(32 * 16.0).reshape(32, 16))

    def loss(y):
        return jnp.sum((jnp.tanh(y) - target) ** 2)

    def loss_pair(x, kernel, bias):
        y, y_t = dense_pair(x, x.T, kernel, kernel.T.astype(jnp.bfloat16), bias)
        return loss(y), y_t

    def loss_autodiff(x, kernel, bias):  # JAX's own backward pass of the same bfloat16 product
        return loss(
            jnp.matmul(x.astype(jnp.bfloat16), kernel.astype(jnp.bfloat16), preferred_element_type=jnp.float32) + bias
        )

    def loss_float32(x, kernel, bias):
        return loss(x @ kernel + bias)

    @jax.jit  # one compilation, not one per operation
    def gradients(x, kernel, bias):
        pair = jax.value_and_grad(loss_pair, argnums=(0, 1, 2), has_aux=True)(x, kernel, bias)
        autodiff = jax.value_and_grad(loss_autodiff, argnums=(0, 1, 2))(x, kernel, bias)
        exact = jax.grad(loss_float32, argnums=(0, 1, 2))(x, kernel, bias)
        y = jnp.matmul(x.astype(jnp.bfloat16), kernel.astype(jnp.bfloat16), preferred_element_type=jnp.float32)
        return pair, autodiff, exact, y + bias

    ((value, y_t), pair), (autodiff_value, autodiff), exact, y = gradients(x, kernel, bias)
    assert float(value) == float(autodiff_value)  # the forward product is the same computation
    np.testing.assert_allclose(y_t, y.T, rtol=1e-5, atol=1e-5)  # the feature-major output is y^T
    # dx, dW, db: within 1% of float32, and no further from it than autodiff's bfloat16 backward
    # (which rounds the input gradient to bfloat16; this one rounds dy and sums in float32).
    for got, reference, want in zip(pair, autodiff, exact, strict=True):
        assert relative_error(got, want) < 0.01
        assert relative_error(got, want) <= 1.5 * relative_error(reference, want) + 1e-6


@pytest.mark.parametrize(
    "layers", ["plain", "batch_norm", slow_variant("dropout_layer_norm"), slow_variant("simba_dropout")]
)
def test_plain_layout_network_matches_float32_and_the_autodiff_bfloat16_network(layers):
    cfg32 = NetworkConfig(
        family="simba" if layers.startswith("simba") else "mlp",
        hidden=(32, 32) if layers.startswith("simba") else (64, 64),  # SimBa's blocks are 4 times wider
        batch_norm=layers.endswith("batch_norm"),
        dropout_rate=0.2 if "dropout" in layers else 0.0,
        layer_norm=layers == "dropout_layer_norm",
    )
    cfg16 = dataclasses.replace(cfg32, precision="bfloat16")
    x = jax.random.normal(jax.random.key(0), (32, 10))
    variables = jax.jit(make_trunk(cfg32).init)(jax.random.key(1), x)
    # Same parameter tree (names, shapes, float32) for both precisions: one checkpoint format.
    shapes16 = jax.eval_shape(make_trunk(cfg16).init, jax.random.key(1), x)
    assert jax.tree.structure(shapes16) == jax.tree.structure(variables)
    assert jax.tree.leaves(shapes16) == [jax.ShapeDtypeStruct(v.shape, v.dtype) for v in jax.tree.leaves(variables)]

    def loss(params, cfg, plain_layout):
        extra = {"kernels_t": transposed_kernels({"trunk": params})["trunk"]} if plain_layout else {}
        out, updates = make_trunk(cfg).apply(
            {**variables, "params": params, **extra},
            x,
            train=True,
            dropout=True,
            plain_layout=plain_layout,
            mutable=["batch_stats"],
            rngs={"dropout": jax.random.key(2)},
        )
        return jnp.mean((out - 0.5) ** 2), (out, updates)

    # Jitted (one compilation per variant, not one per operation): the eager pass cost 10-20 s on 2 cores.
    grad = jax.jit(jax.value_and_grad(loss, has_aux=True), static_argnums=(1, 2))
    (_, (out32, _)), g32 = grad(variables["params"], cfg32, False)
    (_, (out16, stats16)), g16 = grad(variables["params"], cfg16, False)
    (_, (out_plain, stats_plain)), g_plain = grad(variables["params"], cfg16, True)
    assert all(leaf.dtype == jnp.float32 for leaf in jax.tree.leaves(g_plain))
    assert not np.array_equal(out16, out32)  # bfloat16 really rounds ...
    np.testing.assert_allclose(out16, out32, rtol=0.05, atol=0.02)  # ... by about 2**-8 per product
    assert relative_error(g16, g32) < 0.04  # 0.02-0.03 seen, depending on the dropout mask drawn
    # The plain-layout pass computes the same network (same dropout masks, same statistics), and the
    # same gradients up to the rounding of its feature-major operands.
    np.testing.assert_allclose(out_plain, out16, rtol=1e-5, atol=1e-6)
    jax.tree.map(np.testing.assert_array_equal, stats_plain, stats16)
    assert relative_error(g_plain, g16) < 1e-2


@pytest.mark.parametrize("algo", ["sac", slow_variant("crossq"), slow_variant("sac-simba"), slow_variant("td3")])
def test_transposed_kernels_follow_every_parameter_change_and_survive_a_checkpoint(algo):
    """The W^T copies the plain-layout pass reads must be exactly those of the current parameters."""
    if algo == "td3":  # TD3's deterministic actor and twin critics, from its own config
        cfg = td3_config(precision="bfloat16", policy_delay=2, gradient_steps=3)
        learner = learner_of(cfg)
    else:
        family = "simba" if algo.endswith("simba") else "mlp"
        bf16 = NetworkConfig(
            family=family, hidden=(8, 8), precision="bfloat16", batch_norm=algo == "crossq", renorm_warmup_steps=2
        )
        tiny_config, make = (tiny_crossq_config, make_crossq) if algo == "crossq" else (tiny_sac_config, make_sac)
        cfg = tiny_config(policy_delay=2, gradient_steps=3, actor=bf16, critic=bf16)
        learner = make(cfg, SPEC)
    state = initial_state(learner)
    steps = jax.jit(learner.gradient_steps_fn)
    for i in range(3):  # 9 gradient steps, the actor updated on every other one
        batches = random_batches(jax.random.key(i), 3, 4)
        before = state
        state, metrics = steps(state, batches, jax.random.split(jax.random.key(10 + i), 3), jnp.float32(1), state.step)
        assert np.isfinite(float(metrics["train/critic_loss"]))
    assert not np.array_equal(jax.tree.leaves(before.actor.params)[0], jax.tree.leaves(state.actor.params)[0])
    for network in ("actor", "critic"):
        params = getattr(state, network).params
        jax.tree.map(np.testing.assert_array_equal, getattr(state, network).kernels_t, transposed_kernels(params))
    restored = state_from_bytes(jax.jit(learner.init_fn)(jax.random.key(1)), state_to_bytes(state))
    jax.tree.map(
        np.testing.assert_array_equal,
        (restored.actor.kernels_t, restored.critic.kernels_t, restored.critic.params),
        (state.actor.kernels_t, state.critic.kernels_t, state.critic.params),
    )
    assert jax.tree.leaves(restored.critic.kernels_t)[0].dtype == jnp.bfloat16


def test_only_bfloat16_networks_carry_transposed_kernels():
    droq_critic = NetworkConfig(hidden=(8, 8), precision="bfloat16", dropout_rate=0.01, layer_norm=True)
    float32 = initial_state(make_sac(tiny_sac_config(), SPEC))
    assert float32.actor.kernels_t is None and float32.critic.kernels_t is None  # no copies to store
    cfg = tiny_sac_config(critic=droq_critic)  # float32 actor, bfloat16 DroQ critic
    state = initial_state(make_sac(cfg, SPEC))
    assert state.actor.kernels_t is None
    jax.tree.map(np.testing.assert_array_equal, state.critic.kernels_t, transposed_kernels(state.critic.params))
