"""Acting on `Acting.policy_part(state)` is acting on the whole state, for every algorithm and exploration
kind: the host loop passes only that part to its per-step programs (rlbench.loop.compiled), so a field an
algorithm's acting reads and its policy_part leaves out would break exactly here."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from rlbench.config.registry import ALGORITHMS
from rlbench.types import EnvSpec
from tests.variants import slow_variant

BOX, DISCRETE = EnvSpec(obs_dim=3, action_dim=2), EnvSpec(obs_dim=3, action_dim=1, n_actions=4)
SMALL = {"policy_kwargs": {"net_arch": [16, 16]}}
CASES = [
    ("sac", {}, BOX),
    ("sac", {"use_sde": True}, BOX),
    ("td3", {"noise_type": "ornstein-uhlenbeck", "noise_std": 0.3}, BOX),
    ("ppo", {"n_steps": 8, "batch_size": 4}, DISCRETE),
    slow_variant("tqc", {}, BOX),
    slow_variant("droq", {}, BOX),
    slow_variant("crossq", {}, BOX),
    slow_variant("td3", {}, BOX),
    slow_variant("ddpg", {}, BOX),
    slow_variant("ppo", {"n_steps": 8, "batch_size": 4}, BOX),
    slow_variant("ppo", {"n_steps": 8, "batch_size": 4, "use_sde": True}, BOX),
    slow_variant("a2c", {}, DISCRETE),
]


def learner_and_state(name: str, keys: dict, spec: EnvSpec):
    algo = ALGORITHMS[name]
    cfg = algo.build_config({**algo.preset, **SMALL, **keys}, 2, "test")
    learner = algo.make_learner(cfg, spec)
    return learner, jax.jit(learner.init_fn)(jax.random.key(0))


@pytest.mark.parametrize(("name", "keys", "spec"), CASES, ids=lambda case: str(case))
def test_acting_on_the_policy_part_is_acting_on_the_whole_state(name, keys, spec):
    learner, state = learner_and_state(name, keys, spec)
    acting = learner.acting
    part = acting.policy_part(state)
    obs = jax.random.normal(jax.random.key(1), (2, spec.obs_dim))
    key, starts = jax.random.key(2), np.array([True, False])
    explore, sample, evaluate = jax.jit(acting.explore), jax.jit(acting.sample), jax.jit(acting.evaluate)
    for whole, given_part in [
        (explore(state, obs, key, starts, jnp.float32(1.0)), explore(part, obs, key, starts, jnp.float32(1.0))),
        (sample(state, obs, key), sample(part, obs, key)),
        (evaluate(state, obs), evaluate(part, obs)),
    ]:
        for a, b in zip(jax.tree.leaves(whole), jax.tree.leaves(given_part), strict=True):
            np.testing.assert_array_equal(jax.random.key_data(a) if _is_key(a) else a, _key_data(b))


@pytest.mark.parametrize("name", ["sac", "crossq", "td3", "ppo"])
def test_the_policy_part_leaves_out_the_optimizer_state_and_the_critics(name):
    learner, state = learner_and_state(name, {"n_steps": 8, "batch_size": 4} if name == "ppo" else {}, BOX)
    part = learner.acting.policy_part(state)
    whole, kept = len(jax.tree.leaves(state)), len(jax.tree.leaves(part))
    assert kept < whole / 2, (kept, whole)
    paths = [jax.tree_util.keystr(path) for path, _ in jax.tree_util.tree_leaves_with_path(part)]
    assert not [path for path in paths if "opt_state" in path or "critic" in path], paths


def _is_key(x) -> bool:
    return jax.dtypes.issubdtype(getattr(x, "dtype", None), jax.dtypes.prng_key)


def _key_data(x):
    return jax.random.key_data(x) if _is_key(x) else x
