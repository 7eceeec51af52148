"""SimBa networks (`policy: SimbaPolicy`): the trunk against hand-computed values, its parameter count, the
family in every algorithm's config, AdamW, and CrossQ's BatchRenorm in place of SimBa's LayerNorms."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from rlbench.algos.common.steps import make_adam
from rlbench.config.hyperparams import merge
from rlbench.config.registry import get_algo
from rlbench.errors import ConfigError
from rlbench.networks.actor import SquashedGaussianActor
from rlbench.networks.critic import CriticEnsemble
from rlbench.networks.mlp import NetworkConfig
from rlbench.networks.simba import SimbaTrunk
from rlbench.networks.trunk import trunk_units
from tests.conftest import off_policy_algorithms

SIMBA = NetworkConfig(family="simba", hidden=(3,))


def count(tree) -> int:
    return sum(leaf.size for leaf in jax.tree.leaves(tree))


def test_trunk_is_a_pre_normalised_residual_block_then_a_final_layer_norm():
    """input [0, 1, 2]; Dense_input the identity; the block: LayerNorm -> [-a, 0, a] (a = sqrt(3/2)), Dense_0
    copies it into the first 3 of its 12 units, ReLU keeps [0, 0, a], Dense_1 sends unit 2 to output 0:
    y = [a, 0, 0]; the residual sum x + y = [a, 1, 2]; then the final LayerNorm."""
    x = jnp.array([[0.0, 1.0, 2.0]])
    shapes = jax.eval_shape(SimbaTrunk(SIMBA).init, jax.random.key(0), x)["params"]
    params = jax.tree.map(lambda leaf: jnp.zeros(leaf.shape), shapes)
    params["Dense_input"]["kernel"] = jnp.eye(3)
    params["Block_0"]["Dense_0"]["kernel"] = jnp.eye(3, 12)
    params["Block_0"]["Dense_1"]["kernel"] = jnp.zeros((12, 3)).at[2, 0].set(1.0)
    for norm in (params["Block_0"]["Norm"], params["Norm_output"]):
        norm["scale"] = jnp.ones(3)
    out = np.asarray(jax.jit(SimbaTrunk(SIMBA).apply)({"params": params}, x))[0]

    a = math.sqrt(1.5) / math.sqrt(1 + 1e-6 * 1.5)  # LayerNorm's epsilon 1e-6 on the variance 2/3
    summed = np.array([a, 1.0, 2.0])
    mean, var = summed.mean(), summed.var()
    expected = (summed - mean) / math.sqrt(var + 1e-6)
    np.testing.assert_allclose(out, expected, rtol=1e-5)
    np.testing.assert_allclose(out, [-0.42838, -0.95293, 1.38131], atol=1e-4)  # by hand, from [1.2247, 1, 2]


@pytest.mark.parametrize("batch_norm", [False, True])
def test_parameter_count_formula(batch_norm):
    """d w + w + n (8 w^2 + 7 w) + 2 w; BatchRenorm adds 2 d (the input's scale and bias)."""
    d, w, n = 5, 4, 2
    cfg = NetworkConfig(family="simba", hidden=(w,) * n, batch_norm=batch_norm)
    variables = jax.eval_shape(SimbaTrunk(cfg).init, jax.random.key(0), jnp.zeros((2, d)))
    assert count(variables["params"]) == d * w + w + n * (8 * w**2 + 7 * w) + 2 * w + (2 * d if batch_norm else 0)
    # Actor: the trunk plus mean and log_std heads; critics: the trunk on obs + action, one scalar head each.
    actor = jax.eval_shape(SquashedGaussianActor(2, cfg).init, jax.random.key(0), jnp.zeros((1, d)))
    assert count(actor["params"]) == count(variables["params"]) + 2 * (w * 2 + 2)
    critics = jax.eval_shape(
        CriticEnsemble(cfg, n_critics=3).init, jax.random.key(0), jnp.zeros((1, d - 2)), jnp.zeros((1, 2))
    )
    assert count(critics["params"]) == 3 * (count(variables["params"]) + w + 1)
    assert trunk_units(cfg) == 2 * w + n * 6 * w


def test_he_normal_block_kernels_and_lecun_input_layer():
    """SBX's initialisations: the block kernels He normal (std sqrt(2 / fan_in)), the input layer Flax's default."""
    cfg = NetworkConfig(family="simba", hidden=(256,))
    params = jax.jit(SimbaTrunk(cfg).init)(jax.random.key(0), jnp.zeros((1, 64)))["params"]
    assert float(jnp.std(params["Block_0"]["Dense_0"]["kernel"])) == pytest.approx(math.sqrt(2 / 256), rel=0.05)
    assert float(jnp.std(params["Dense_input"]["kernel"])) == pytest.approx(math.sqrt(1 / 64), rel=0.05)


def config(algo, **entry):
    spec = get_algo(algo)
    return spec.build_config(merge(spec.preset, entry), 1, algo)


@pytest.mark.parametrize("algo", off_policy_algorithms())
def test_simba_policy_in_every_algorithm_and_back_to_its_spelling(algo):
    cfg = config(algo, policy="SimbaPolicy", policy_kwargs={"net_arch": [64, 64]})
    assert cfg.actor.family == cfg.critic.family == "simba"
    assert cfg.weight_decay == 1e-4  # AdamW, as SBX's SimbaPolicy
    spelled = get_algo(algo).config_to_hyperparams(cfg)
    assert spelled["policy"] == "SimbaPolicy"
    assert get_algo(algo).build_config(spelled, 1, algo) == cfg
    plain = config(algo)
    assert plain.actor.family == "mlp" and plain.weight_decay is None
    assert get_algo(algo).config_to_hyperparams(plain)["policy"] == "MlpPolicy"


@pytest.mark.parametrize(
    "entry,message",
    [
        ({"policy": "CnnPolicy"}, r"^policy: 'CnnPolicy' is not supported; valid: MlpPolicy, SimbaPolicy$"),
        ({"policy": "MultiInputPolicy"}, "for dict observations.*valid: MlpPolicy, SimbaPolicy"),
        (
            {"policy": "SimbaPolicy", "policy_kwargs": {"net_arch": {"pi": [64], "qf": [64, 128]}}},
            r"net_arch\['qf'\]: SimbaPolicy's residual blocks keep one width .*got \[64, 128\]",
        ),
        ({"policy": "SimbaPolicy", "policy_kwargs": {"net_arch": []}}, "keep one width"),
        (
            {"policy_kwargs": {"optimizer_kwargs": {"weight_decay": 0.1}}},
            "weight_decay=<float> with policy SimbaPolicy",
        ),
        (
            {"policy": "SimbaPolicy", "policy_kwargs": {"optimizer_kwargs": {"weight_decay": -1}}},
            r"weight_decay: -1.0 is out of range",
        ),
    ],
)
def test_policy_rejections(entry, message):
    with pytest.raises(ConfigError, match=message):
        config("sac", **entry)


def test_adamw_decays_the_weights_by_learning_rate_times_weight_decay():
    """With zero gradients Adam's step is 0, so AdamW moves p by -lr * weight_decay * p."""
    tx = make_adam(0.1, 0.9, weight_decay=0.5)
    params = {"w": jnp.array([2.0, -4.0])}
    updates, _ = tx.update(jax.tree.map(jnp.zeros_like, params), tx.init(params), params)
    np.testing.assert_allclose(optax.apply_updates(params, updates)["w"], [2.0 - 0.1, -4.0 + 0.2], rtol=1e-6)
    plain = make_adam(0.1, 0.9)  # MlpPolicy: Adam, no decay
    updates, _ = plain.update(jax.tree.map(jnp.zeros_like, params), plain.init(params), params)
    np.testing.assert_array_equal(optax.apply_updates(params, updates)["w"], params["w"])


@pytest.mark.parametrize("batch_norm", [True, False])
def test_crossq_simba_normalises_with_batch_renorm_when_batch_norm_is_on(batch_norm):
    """As SBX's SimbaCrossQPolicy: BatchRenorm on the input and in place of each LayerNorm; with batch_norm
    False (SBX would still use BatchRenorm) SimBa's own LayerNorms."""
    kwargs = {"net_arch": [16], "batch_norm": batch_norm, "batch_norm_actor": batch_norm}
    cfg = config("crossq", policy="SimbaPolicy", policy_kwargs=kwargs)
    assert cfg.critic.batch_norm is batch_norm and cfg.weight_decay == 1e-4 and cfg.adam_b1 == 0.5
    variables = jax.eval_shape(CriticEnsemble(cfg.critic).init, jax.random.key(0), jnp.zeros((4, 3)), jnp.zeros((4, 1)))
    trunk_stats = variables.get("batch_stats", {}).get("critics", {}).get("trunk", {})
    if batch_norm:
        assert set(trunk_stats) == {"Norm_input", "Block_0", "Norm_output"}
        assert set(trunk_stats["Block_0"]) == {"Norm"}
    else:
        assert trunk_stats == {}


def test_memory_estimate_counts_simba_networks():
    """[256, 256]: an MLP trunk of about 70k parameters, SimBa's of about 1.06M (two blocks, 1024 wide inside);
    its activations: 2 w (input layer, final norm) + 6 w per block (norm, 4 w hidden, output)."""
    from rlbench.algos.common.footprint import update_activation_bytes
    from rlbench.store.learner_state import state_array_bytes
    from rlbench.types import EnvSpec

    spec, sac = EnvSpec(obs_dim=17, action_dim=6), get_algo("sac")
    mlp, simba = config("sac"), config("sac", policy="SimbaPolicy")

    def state_bytes(cfg):  # what check_learner_memory counts: the state's arrays, from abstract shapes
        return state_array_bytes(sac.make_learner(cfg, spec).init_fn)

    assert state_bytes(simba) > 10 * state_bytes(mlp)
    assert (trunk_units(mlp.critic), trunk_units(simba.critic)) == (512, 2 * 256 + 2 * 6 * 256)
    assert update_activation_bytes(simba, spec) > 5 * update_activation_bytes(mlp, spec)
