"""The seed axis: one vmapped update equals K separate ones, one seed has no axis on the device, the update
traces once, the actor branch stays a branch under vmap (counted), and seed i starts as a single run."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from rlbench.algos.common.fused import make_gradient_steps, make_update
from rlbench.algos.common.seed_axis import SeedAxis
from rlbench.buffers.uniform import make_uniform_buffer
from rlbench.config.hyperparams import merge
from rlbench.config.registry import get_algo
from rlbench.types import EnvSpec
from tests.unit.test_update import random_batches
from tests.variants import slow_variant

SPEC = EnvSpec(obs_dim=3, action_dim=2)
K = 3
SHARED = (3, 4)  # update(state, buffer_state, new, progress_remaining, first_step): the last two are shared


def config(algo: str, **overrides):
    spec = get_algo(algo)
    settings = {
        "batch_size": 32,
        "buffer_size": 256,
        "gradient_steps": 4,
        "policy_kwargs": {"net_arch": [32, 32]},
    }
    if algo == "droq":
        settings["policy_delay"] = 4  # DroQ's 20 would need 20 steps to reach one actor update
    if algo == "crossq":
        settings["policy_kwargs"]["renorm_warmup_steps"] = 2  # renormalizing (r, d) within the test's steps
    return spec.build_config(merge(spec.preset, settings, overrides), 1, algo)


def make(algo: str, **overrides):
    cfg = config(algo, **overrides)
    buffer = make_uniform_buffer(cfg.buffer_size, SPEC)
    learner = get_algo(algo).make_learner(cfg, SPEC)
    return cfg, learner, buffer, make_update(cfg, buffer, learner.gradient_steps_fn)


def one_seed_inputs(learner, buffer, seed: int):
    """A fresh state, a buffer holding 64 random transitions, and 4 new ones, all drawn from `seed`."""
    prefill, new = (
        jax.tree.map(lambda x: x[0], random_batches(jax.random.key(100 * seed + i), 1, n)) for i, n in [(1, 64), (2, 4)]
    )
    buffer_state = jax.jit(buffer.add_fn)(buffer.init_fn(), prefill)
    return jax.jit(learner.init_fn)(jax.random.key(seed)), buffer_state, new


def stacked_inputs(axis, learner, buffer):
    per_seed = [one_seed_inputs(learner, buffer, seed) for seed in range(axis.n_seeds)]
    return per_seed, [axis.stack(list(trees)) for trees in zip(*per_seed, strict=True)]


def as_arrays(tree):
    """Every leaf as a NumPy array: keys as their bits, floats (bfloat16 included) as float64."""
    arrays = []
    for x in jax.tree.leaves(tree):
        if jnp.issubdtype(x.dtype, jax.dtypes.prng_key):
            x = jax.random.key_data(x)
        arrays.append(np.asarray(x, np.float64 if jnp.issubdtype(x.dtype, jnp.floating) else None))
    return arrays


@pytest.mark.parametrize(
    "algo,overrides",
    [
        ("sac", {}),
        slow_variant("crossq", {}, id="crossq"),
        slow_variant("droq", {}, id="droq"),
        slow_variant("sac", {"precision": "bfloat16"}, id="sac-bfloat16"),
        slow_variant("sac", {"policy": "SimbaPolicy"}, id="sac-simba"),
        # its noise state gets the seed axis
        slow_variant("td3", {"noise_type": "ornstein-uhlenbeck", "noise_std": 0.3}, id="td3"),
    ],
    ids=["sac", "crossq", "droq", "sac-bfloat16", "sac-simba", "td3"],
)
def test_vmapped_update_equals_separate_updates(algo, overrides):
    _, learner, buffer, update = make(algo, **overrides)
    axis = SeedAxis(K)
    per_seed, stacked = stacked_inputs(axis, learner, buffer)
    progress = jnp.float32(0.9)
    vmapped = jax.jit(axis.map(update, shared_argnums=SHARED))(*stacked, progress, 0)
    single = jax.jit(update)
    batched = as_arrays(vmapped)  # seed i's arrays sliced on the host: no device op to compile per leaf shape
    for i, (state, buffer_state, new) in enumerate(per_seed):
        expected = single(state, buffer_state, new, progress, state.step)
        # Params, target params, optimizer state, BatchRenorm statistics, keys, buffer, metrics.
        for got, want in zip([array[i] for array in batched], as_arrays(expected), strict=True):
            if np.issubdtype(want.dtype, np.floating):  # batched products may round differently
                assert np.linalg.norm(got - want) <= 1e-5 * np.linalg.norm(want) + 1e-30, (i, got, want)
            else:
                np.testing.assert_array_equal(got, want)


def test_one_seed_has_no_axis_on_the_device_and_one_on_the_host():
    """A one-seed run compiles the unbatched functions themselves (bit for bit a run without seeds):
    the axis adds nothing on the device, and the host's [1, ...] arrays are converted at the boundary."""
    _, learner, buffer, update = make("droq")
    axis = SeedAxis(1)
    [(state, buffer_state, new)], (states, buffer_states, news) = stacked_inputs(axis, learner, buffer)
    assert axis.map(update, shared_argnums=SHARED) is update
    assert states is state and buffer_states is buffer_state and news is new
    assert axis.take(state, 0) is state and axis.first(state.step) is state.step
    assert axis.broadcast(buffer_state) is buffer_state
    host_obs = np.arange(6.0).reshape(1, 2, 3)
    np.testing.assert_array_equal(axis.device(host_obs), host_obs[0])
    assert axis.host(jnp.ones((2, 3))).shape == (1, 2, 3)
    three = SeedAxis(3)
    assert three.device(np.zeros((3, 2))).shape == (3, 2) and three.host(jnp.ones((3, 2))).shape == (3, 2)
    assert jax.tree.leaves(three.broadcast({"rows": jnp.ones((4, 5))}))[0].shape == (3, 4, 5)


def counting_update(cfg, learner, buffer, state, counter: list[int]):
    """The fused update of `learner` with a host callback in its actor step: one call per seed that runs it."""

    def actor_step(state, batch, key):
        # With a per-seed argument the callback runs once per seed; with none, once for all of them.
        jax.debug.callback(lambda seed_step: counter.append(1), state.step)
        return learner.actor_step_fn(state, batch, key)

    batch = jax.tree.map(lambda x: x[0], random_batches(jax.random.key(0), 1, cfg.batch_size))
    actor_metrics = jax.eval_shape(learner.actor_step_fn, state, batch, jax.random.key(0))[1]
    return make_update(cfg, buffer, make_gradient_steps(cfg, learner.critic_step_fn, actor_step, list(actor_metrics)))


def sub_jaxprs(params):
    """The jaxprs among an equation's parameters: a scan's body, a cond's branches, a jit's callee."""
    for value in params.values():
        for item in value if isinstance(value, tuple | list) else [value]:
            if hasattr(item, "eqns"):
                yield item
            elif hasattr(getattr(item, "jaxpr", None), "eqns"):
                yield item.jaxpr


def primitives_under_cond(jaxpr, inside=False):
    """(primitive name, whether some enclosing equation is a `cond`) for every equation, recursively."""
    for eqn in jaxpr.eqns:
        yield eqn.primitive.name, inside
        for sub in sub_jaxprs(eqn.params):
            yield from primitives_under_cond(sub, inside or eqn.primitive.name == "cond")


def test_actor_branch_runs_once_per_policy_delay_steps_under_vmap_and_traces_once():
    # 10 gradient steps, the actor on every 4th: from step 0 it runs on steps 4 and 8, from 10 on 12, 16 and
    # 20, from 20 on 24 and 28. A batched predicate would make the cond a select that runs it on all 10.
    cfg, learner, buffer, _ = make("droq", gradient_steps=10)
    axis = SeedAxis(K)
    states, buffer_states, new = stacked_inputs(axis, learner, buffer)[1]
    counter: list[int] = []
    counted_update = counting_update(cfg, learner, buffer, axis.first(states), counter)
    n_traces = 0

    def one_seed_update(*args):
        nonlocal n_traces
        n_traces += 1
        return counted_update(*args)

    per_seed_update = axis.map(one_seed_update, shared_argnums=SHARED)

    def update(states, buffer_states, new, progress_remaining):  # as the runner calls it
        return per_seed_update(states, buffer_states, new, progress_remaining, axis.first(states.step))

    update = jax.jit(update, donate_argnums=(0, 1))
    for i, actor_steps in enumerate([2, 3, 2]):
        counter.clear()
        states, buffer_states, _ = update(states, buffer_states, new, jnp.asarray(1 - i / 3))
        jax.effects_barrier()
        assert len(counter) == K * actor_steps, i
    assert n_traces == 1
    np.testing.assert_array_equal(states.step, [30] * K)

    jaxpr = jax.make_jaxpr(axis.map(counted_update, shared_argnums=SHARED))
    found = set(primitives_under_cond(jaxpr(states, buffer_states, new, jnp.float32(1), 0).jaxpr))
    assert ("debug_callback", True) in found  # the actor step sits in a cond branch ...
    assert ("debug_callback", False) not in found  # ... and nowhere else (no select of both branches)


def test_seed_i_starts_exactly_as_a_single_run_with_that_seed():
    _, learner, _, _ = make("crossq")
    init = jax.jit(learner.init_fn)  # as the runner compiles it
    seeds = [7, 8, 9]
    keys = [jax.random.split(jax.random.key(seed))[0] for seed in seeds]  # the runner's (state key, act key)
    axis = SeedAxis(len(seeds))
    states = axis.init(init, keys)
    for i, key in enumerate(keys):
        for got, want in zip(as_arrays(axis.take(states, i)), as_arrays(init(key)), strict=True):
            np.testing.assert_array_equal(got, want)
    kernels = max(jax.tree.leaves(states.critic.params), key=np.size)
    assert not np.array_equal(kernels[0], kernels[1])  # the seeds differ
