"""TQC and CrossQ + TQC: the quantile Huber loss and the truncated target against hand-computed values,
fused equals unfused, the distributional critic's shapes, and the quantile keys."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from rlbench.algos.common.quantiles import Quantiles, mean_of_quantiles, quantile_huber_loss, truncated_quantile_target
from rlbench.algos.crossq.config import CrossQConfig
from rlbench.algos.crossq.update import make_learner as make_crossq
from rlbench.algos.tqc.config import TQCConfig
from rlbench.algos.tqc.update import make_learner as make_tqc
from rlbench.config.algorithms.crossq import build_config as build_crossq_config
from rlbench.config.algorithms.sac import build_config as build_sac_config
from rlbench.config.algorithms.tqc import build_config as build_tqc_config
from rlbench.errors import ConfigError
from rlbench.networks.mlp import NetworkConfig
from tests.conftest import tiny_config
from tests.unit.test_update import SPEC, initial_state, leaves_close, random_batches
from tests.variants import slow_variant


def test_quantile_huber_loss_by_hand():
    # One critic, one sample, quantiles z = [0, 1] at tau = [0.25, 0.75]; target atoms [0.5, 3].
    # z=0: delta = [0.5, 3], Huber [0.125, 2.5], weight |0.25 - 0| -> 0.03125 + 0.625
    # z=1: delta = [-0.5, 2], Huber [0.125, 1.5], weights |0.75 - 1|, |0.75 - 0| -> 0.03125 + 1.125
    # mean of the four terms: 1.8125 / 4.
    huber = jax.jit(quantile_huber_loss)  # one compilation per shape, not one per operation
    loss = huber(jnp.array([[[0.0, 1.0]]]), jnp.array([[0.5, 3.0]]))
    np.testing.assert_allclose(loss, 1.8125 / 4, rtol=1e-6)
    # Inside |delta| <= 1 the Huber term is quadratic, outside linear: delta = 2 gives 1.5, not 2.
    assert float(huber(jnp.array([[[0.0]]]), jnp.array([[2.0]]))) == pytest.approx(0.5 * 1.5)


def test_truncated_target_pools_sorts_and_drops_the_top_quantiles_of_each_sample():
    # Two critics, two samples, three quantiles; drop 1 per critic: keep the 4 smallest of 6 pooled.
    next_quantiles = jnp.array(
        [
            [[1.0, 5.0, 3.0], [10.0, 11.0, 12.0]],  # critic 0: sample 0, sample 1
            [[2.0, 0.0, 4.0], [13.0, 14.0, 15.0]],  # critic 1
        ]
    )
    target = truncated_quantile_target(
        next_quantiles,
        next_log_prob=jnp.array([-2.0, 0.0]),
        reward=jnp.array([1.0, 1.0]),
        terminated=jnp.array([0.0, 1.0]),
        alpha=jnp.asarray(0.1),
        gamma=0.5,
        quantiles=Quantiles(n_quantiles=3, top_quantiles_to_drop_per_net=1),
    )
    # Sample 0: pooled sorted [0, 1, 2, 3, 4, 5] -> [0, 1, 2, 3]; minus alpha * log pi = +0.2;
    # r + gamma * (...) = 1 + 0.5 * [0.2, 1.2, 2.2, 3.2]. Sample 1 is terminal: the reward alone.
    np.testing.assert_allclose(target, [[1.1, 1.6, 2.1, 2.6], [1.0, 1.0, 1.0, 1.0]], rtol=1e-6)


def test_the_actor_reads_the_mean_of_all_quantiles_of_all_critics():
    quantiles = jnp.array([[[1.0, 3.0], [0.0, 0.0]], [[5.0, 7.0], [2.0, 4.0]]])  # [2 critics, 2 samples, 2]
    np.testing.assert_allclose(mean_of_quantiles(quantiles), [4.0, 1.5])


def tqc_config(**overrides):
    values = dict(policy_delay=2, quantiles=Quantiles(n_quantiles=5, top_quantiles_to_drop_per_net=2))
    return tiny_config(TQCConfig, **values | overrides)


def crossq_tqc_config(**overrides):
    bn = dict(batch_norm=True, renorm_warmup_steps=2)
    values = dict(
        policy_delay=2,
        actor=NetworkConfig(hidden=(8, 8), **bn),
        critic=NetworkConfig(hidden=(8, 8), **bn),
        quantiles=Quantiles(n_quantiles=5, top_quantiles_to_drop_per_net=1),
    )
    return tiny_config(CrossQConfig, **values | overrides)


@pytest.mark.parametrize(
    "make,cfg", [(make_tqc, tqc_config()), slow_variant(make_crossq, crossq_tqc_config())], ids=["tqc", "crossq-tqc"]
)
def test_fused_equals_unfused_with_quantile_critics(make, cfg):
    learner = make(cfg, SPEC)
    state = initial_state(learner)
    assert state.critic.params["critics"]["q"]["kernel"].shape == (2, 8, 5)  # [n_critics, in, n_quantiles]
    batches = random_batches(jax.random.key(1), 4, cfg.batch_size)
    keys = jax.random.split(jax.random.key(2), 4)
    steps = jax.jit(learner.gradient_steps_fn)
    fused, metrics = steps(state, batches, keys, jnp.float32(1), state.step)
    single = state
    for i in range(4):
        one = jax.tree.map(lambda x, i=i: x[i : i + 1], batches)
        single, _ = steps(single, one, keys[i : i + 1], jnp.float32(1), single.step)
    assert int(fused.step) == 4 and np.isfinite(float(metrics["train/critic_loss"]))
    assert not np.array_equal(
        state.critic.params["critics"]["q"]["kernel"], fused.critic.params["critics"]["q"]["kernel"]
    )
    leaves_close(fused, single, tol=1e-5)


def test_quantile_keys_where_rl_zoo_puts_them_and_refusals():
    cfg = build_tqc_config(
        {"top_quantiles_to_drop_per_net": 5, "tau": 0.02, "policy_kwargs": {"n_quantiles": 20, "n_critics": 3}}, 1, "t"
    )
    assert cfg.quantiles == Quantiles(20, 5) and cfg.n_critics == 3 and cfg.tau == 0.02
    assert cfg.quantiles.n_target_quantiles(cfg.n_critics) == 45
    assert build_tqc_config({}, 1, "t").quantiles == Quantiles(25, 2)  # SB3-contrib's defaults
    with pytest.raises(ConfigError, match="would drop every quantile"):
        build_tqc_config({"top_quantiles_to_drop_per_net": 5, "policy_kwargs": {"n_quantiles": 5}}, 1, "t")
    with pytest.raises(ConfigError, match=r"top_quantiles_to_drop_per_net: quantile critics are TQC's.*--algo tqc"):
        build_sac_config({"top_quantiles_to_drop_per_net": 2}, 1, "t")
    with pytest.raises(ConfigError, match=r"policy_kwargs.n_quantiles: quantile critics are TQC's"):
        build_sac_config({"policy_kwargs": {"n_quantiles": 10}}, 1, "t")
    with pytest.raises(ConfigError, match="BatchRenorm is CrossQ's"):
        build_tqc_config({"policy_kwargs": {"batch_norm": True}}, 1, "t")
    # CrossQ + TQC: quantile critics only when n_quantiles is set.
    assert build_crossq_config({}, 1, "t").quantiles is None
    assert build_crossq_config({"policy_kwargs": {"n_quantiles": 10}}, 1, "t").quantiles == Quantiles(10, 2)
    with pytest.raises(ConfigError, match="n_quantiles"):
        build_crossq_config({"top_quantiles_to_drop_per_net": 2}, 1, "t")
