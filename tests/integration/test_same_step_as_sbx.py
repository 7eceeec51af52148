"""rlbench's SAC, TQC and CrossQ gradient steps are SBX's: from the same parameters (and BatchRenorm
statistics), batch and Gaussian noise, one step of each (critic, Polyak update, actor, temperature) gives
the same losses, the same gradient of every parameter and the same target critics or statistics after it,
SBX's computed by SBX's own update functions in the peer's venv (tests/peer/sbx_step.py). CrossQ is
compared in BatchRenorm's warm-up (plain batch norm) and after it (renormalised by running statistics).
TD3's step has the same gradients; SBX moves its actor's target at another point of the step (below).

Both steps run with SGD at learning rate 1 in place of Adam (Adam's first step is lr * sign(g), blind to a
gradient's size), so each parameter's change is minus its gradient. Both draw their Gaussian noise through
`jax.random.normal`, which the test replaces while the steps are traced: the same draws become constants
of both compiled steps. The temperature gradient is the check that this comparison can fail: with
`temperature_loss: alpha` (SBX's loss before 0.18) rlbench's gradient in log alpha is SBX's times alpha,
as the two losses say.

TQC's critic loss is the mean of the two critics' losses, SBX's two separate ones, so its critic gradients
are SBX's halved; Adam's step divides by the gradient's scale and does not see the factor, and here its
critic's SGD steps at learning rate 2 (so "grad/critic" is SBX's gradient in both).
"""

import dataclasses
import subprocess
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from flax import traverse_util

from rlbench.bench.row import bench_config
from rlbench.config.registry import ALGORITHMS
from rlbench.types import EnvSpec, Transition
from tests.conftest import REPO_ROOT

PEER_STEP = Path(REPO_ROOT) / "tests" / "peer" / "sbx_step.py"
OBS_DIM, ACTION_DIM, BATCH = 5, 3, 64
WIDTH = 64  # hidden units of every layer: the equality holds at any width
LOG_ALPHA = -1.3  # alpha 0.27: the temperature's two losses differ by this factor


def fixed_inputs() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    return {
        "batch/obs": rng.normal(size=(BATCH, OBS_DIM)).astype(np.float32),
        "batch/action": rng.uniform(-1, 1, (BATCH, ACTION_DIM)).astype(np.float32),
        "batch/next_obs": rng.normal(size=(BATCH, OBS_DIM)).astype(np.float32),
        "batch/reward": rng.normal(size=BATCH).astype(np.float32),
        "batch/terminated": (rng.uniform(size=BATCH) < 0.2).astype(np.float32),
        "noise/critic": rng.normal(size=(BATCH, ACTION_DIM)).astype(np.float32),
        "noise/actor": rng.normal(size=(BATCH, ACTION_DIM)).astype(np.float32),
    }


def batch_of(inputs) -> Transition:
    return Transition(**{k.removeprefix("batch/"): jnp.asarray(v) for k, v in inputs.items() if "batch/" in k})


def minus(before, after):
    return jax.tree.map(lambda x, y: x - y, before, after)


def flat(prefix: str, tree) -> dict[str, np.ndarray]:
    return {f"{prefix}/{k}": np.asarray(v) for k, v in traverse_util.flatten_dict(tree, sep="/").items()}


def start_state(algo, cfg, renorm: bool = False):
    """The initial state, with alpha != 1 and the target critic apart from the critic (so that both terms
    of the TD target are exercised), and SGD as every optimizer: at learning rate 1, except TQC's critic
    at n_critics, which takes SBX's critic step from rlbench's mean of the critics' losses. `renorm`
    (CrossQ): every BatchRenorm layer past its warm-up, with running statistics away from the batch's."""
    state = ALGORITHMS[algo].make_learner(cfg, EnvSpec(OBS_DIM, ACTION_DIM)).init_fn(jax.random.key(0))

    def with_sgd(s, params=None, learning_rate=1.0):
        params = s.params if params is None else params
        sgd = optax.sgd(learning_rate)
        return s.replace(params=params, tx=sgd, opt_state=sgd.init(params))

    critic_learning_rate = float(cfg.n_critics) if algo == "tqc" else 1.0
    state = state.replace(
        actor=with_sgd(state.actor),
        critic=with_sgd(state.critic, learning_rate=critic_learning_rate),
        temperature=with_sgd(state.temperature, {"log_alpha": jnp.asarray(LOG_ALPHA, jnp.float32)}),
    )
    if algo != "crossq":
        moved = jax.tree.map(lambda p: p + 0.01 * jax.random.normal(jax.random.key(1), p.shape), state.critic.params)
        return state.replace(critic=state.critic.replace(target_params=moved))
    if not renorm:
        return state
    return state.replace(
        actor=state.actor.replace(batch_stats=warmed_up(state.actor.batch_stats, cfg.actor.renorm_warmup_steps)),
        critic=state.critic.replace(batch_stats=warmed_up(state.critic.batch_stats, cfg.critic.renorm_warmup_steps)),
    )


def warmed_up(batch_stats, warmup_steps: int):
    """Statistics of a layer that has seen `warmup_steps` batches: running means near 0.5 and variances near
    2, so that r and d are far from 1 and 0 (some clipped)."""
    rng = np.random.default_rng(1)

    def leaf(path, x):
        name = path[-1].key
        if name == "steps":
            return jnp.full(x.shape, warmup_steps, x.dtype)
        if name == "mean":
            return jnp.asarray(rng.normal(0.5, 0.5, x.shape), x.dtype)
        return jnp.asarray(rng.uniform(0.5, 4.0, x.shape), x.dtype)  # var

    return jax.tree_util.tree_map_with_path(leaf, batch_stats)


def log_alpha(state) -> jax.Array:
    return state.temperature.params["log_alpha"]


def rlbench_step(algo, cfg, state, inputs, monkeypatch) -> dict[str, np.ndarray]:
    noise = [inputs["noise/critic"], inputs["noise/actor"]]

    def given_normal(key, shape=(), dtype=jnp.float32):
        assert tuple(shape) == (BATCH, ACTION_DIM)
        return jnp.asarray(noise.pop(0), dtype)

    learner = ALGORITHMS[algo].make_learner(cfg, EnvSpec(OBS_DIM, ACTION_DIM))
    batch = batch_of(inputs)
    with monkeypatch.context() as patch:  # each draw is a constant of the traced step
        patch.setattr(jax.random, "normal", given_normal)
        after_critic, critic_metrics = jax.jit(learner.critic_step_fn)(state, batch, jax.random.key(2))
        after_actor, actor_metrics = jax.jit(learner.actor_step_fn)(after_critic, batch, jax.random.key(3))
    assert not noise
    out = {
        **flat("grad/critic", minus(state.critic.params, after_critic.critic.params)),
        **flat("grad/actor", minus(after_critic.actor.params, after_actor.actor.params)),
        "grad/log_alpha": np.asarray(log_alpha(state) - log_alpha(after_actor)),
        "loss/critic": np.asarray(critic_metrics["train/critic_loss"]),
        "loss/actor": np.asarray(actor_metrics["train/actor_loss"]),
        "loss/temperature": np.asarray(actor_metrics["train/ent_coef_loss"]),
    }
    if algo == "crossq":
        return (
            out
            | flat("after/critic_stats", after_critic.critic.batch_stats)
            | flat("after/actor_stats", after_actor.actor.batch_stats)
        )
    return out | flat("after/target", after_critic.critic.target_params)


def given_to_sbx(algo, cfg, state, inputs) -> dict[str, np.ndarray]:
    given = {
        **inputs,
        **flat("init/actor", state.actor.params),
        **flat("init/critic", state.critic.params),
        "init/log_alpha": np.asarray(state.temperature.params["log_alpha"]),
        "gamma": np.asarray(cfg.gamma),
        "net_arch/pi": np.asarray(cfg.actor.hidden),
        "net_arch/qf": np.asarray(cfg.critic.hidden),
    }
    if algo == "crossq":
        return (
            given
            | flat("init/actor_stats", state.actor.batch_stats)
            | flat("init/critic_stats", state.critic.batch_stats)
        )
    return given | flat("init/target", state.critic.target_params) | {"tau": np.asarray(cfg.tau)}


CASES = [("sac", False), ("tqc", False), ("crossq", False), ("crossq", True)]  # (algo, renorm)


@pytest.fixture(scope="module")
def sbx_steps(peer_python, tmp_path_factory):
    """Every case's start and SBX's step from it, TD3's too, all in one peer process (its imports take ~10 s)."""
    folder = tmp_path_factory.mktemp("sbx_steps")
    cases, command = {}, [peer_python, str(PEER_STEP)]
    for i, (algo, renorm) in enumerate([*CASES, ("td3", False)]):
        cfg = bench_config(algo, 1, [WIDTH, WIDTH])
        if algo == "td3":
            state = td3_start(cfg)
            given = td3_given_to_sbx(cfg, state, td3_inputs())
        else:
            state = start_state(algo, cfg, renorm)
            given = given_to_sbx(algo, cfg, state, fixed_inputs())
        cases[algo, renorm] = cfg, state
        np.savez(folder / f"given_{i}.npz", **given)
        command += [algo, str(folder / f"given_{i}.npz"), str(folder / f"sbx_{i}.npz")]
    env = {"JAX_PLATFORMS": "cpu", "PATH": "/usr/bin:/bin"}
    done = subprocess.run(command, capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    return {case: (*cases[case], dict(np.load(folder / f"sbx_{i}.npz"))) for i, case in enumerate(cases)}


def td3_inputs() -> dict[str, np.ndarray]:
    """TD3 draws once per step: the target policy smoothing noise."""
    return {k: v for k, v in fixed_inputs().items() if k != "noise/actor"}


def td3_start(cfg):
    """TD3's initial state with both targets apart from their networks, SGD(1) as both optimizers."""
    state = ALGORITHMS["td3"].make_learner(cfg, EnvSpec(OBS_DIM, ACTION_DIM)).init_fn(jax.random.key(0))
    sgd = optax.sgd(1.0)

    def prepared(s, key):
        moved = jax.tree.map(lambda p: p + 0.01 * jax.random.normal(jax.random.key(key), p.shape), s.params)
        return s.replace(tx=sgd, opt_state=sgd.init(s.params), target_params=moved)

    return state.replace(actor=prepared(state.actor, 1), critic=prepared(state.critic, 2))


def td3_given_to_sbx(cfg, state, inputs) -> dict[str, np.ndarray]:
    return {
        **inputs,
        **flat("init/actor", state.actor.params),
        **flat("init/actor_target", state.actor.target_params),
        **flat("init/critic", state.critic.params),
        **flat("init/target", state.critic.target_params),
        **{
            name: np.asarray(getattr(cfg, name))
            for name in ("gamma", "tau", "target_policy_noise", "target_noise_clip")
        },
        "net_arch/pi": np.asarray(cfg.actor.hidden),
        "net_arch/qf": np.asarray(cfg.critic.hidden),
    }


def td3_rlbench_step(cfg, state, inputs, monkeypatch) -> dict[str, np.ndarray]:
    """rlbench's TD3 step on a step that updates the actor: critic, actor, then both targets (as SB3)."""
    learner = ALGORITHMS["td3"].make_learner(cfg, EnvSpec(OBS_DIM, ACTION_DIM))
    batch = batch_of(inputs)
    with monkeypatch.context() as patch:
        patch.setattr(jax.random, "normal", lambda key, shape, dtype=jnp.float32: jnp.asarray(inputs["noise/critic"]))
        after_critic, critic_metrics = jax.jit(learner.critic_step_fn)(state, batch, jax.random.key(2))
        after_actor, actor_metrics = jax.jit(learner.actor_step_fn)(after_critic, batch, jax.random.key(3))
    return {
        **flat("grad/critic", minus(state.critic.params, after_critic.critic.params)),
        **flat("grad/actor", minus(state.actor.params, after_actor.actor.params)),
        **flat("after/target", after_actor.critic.target_params),
        **flat("after/actor_target", after_actor.actor.target_params),
        "loss/critic": np.asarray(critic_metrics["train/critic_loss"]),
        "loss/actor": np.asarray(actor_metrics["train/actor_loss"]),
    }


def assert_same(ours: np.ndarray, theirs: np.ndarray, name: str) -> None:
    # float32 sums in another order: a few ulps of the leaf's largest entry apart, no more.
    np.testing.assert_allclose(ours, theirs, rtol=0, atol=2e-5 * np.abs(theirs).max() + 1e-9, err_msg=name)


@pytest.mark.slow  # ~100 s for the four beside a training run (~half idle): the peer builds 3 SBX models
@pytest.mark.parametrize("algo, renorm", CASES, ids=str)
def test_one_gradient_step_equals_sbx_s_from_the_same_parameters_batch_and_noise(algo, renorm, sbx_steps, monkeypatch):
    cfg, state, theirs = sbx_steps[algo, renorm]
    inputs = fixed_inputs()
    ours = rlbench_step(algo, cfg, state, inputs, monkeypatch)

    assert set(theirs) == set(ours)
    n_layers = 6 + 6 if algo == "crossq" else 6  # Dense, head (and BatchRenorm) kernels/scales and biases
    assert len([k for k in theirs if k.startswith("grad/critic/")]) == n_layers
    for name in theirs:
        assert_same(ours[name], theirs[name], name)
    assert np.abs(theirs["grad/log_alpha"]) > 0.1  # a real gradient, not a vanishing one

    # The same comparison sees a difference where there is one: SBX's loss before 0.18.
    before_018 = dataclasses.replace(cfg, temperature_loss="alpha")
    alpha_loss = rlbench_step(algo, before_018, state, inputs, monkeypatch)
    assert not np.allclose(alpha_loss["grad/log_alpha"], theirs["grad/log_alpha"], rtol=0.1)
    np.testing.assert_allclose(alpha_loss["grad/log_alpha"], np.exp(LOG_ALPHA) * theirs["grad/log_alpha"], rtol=1e-5)


@pytest.mark.slow  # shares sbx_steps' peer process
def test_td3_s_step_equals_sbx_s_but_for_when_the_actor_s_target_moves(sbx_steps, monkeypatch):
    """The same gradients, critic target and losses. SBX's TD3 Polyak-updates both targets between the
    critic's step and the actor's, on every gradient step (sbx/td3/td3.py, _train); rlbench, as SB3 and
    the TD3 paper, after the actor's step and only on the steps that update the actor. So one step apart,
    SBX's actor target moves towards the actor before its step, rlbench's towards the actor after it."""
    cfg, state, theirs = sbx_steps["td3", False]
    ours = td3_rlbench_step(cfg, state, td3_inputs(), monkeypatch)
    assert set(theirs) == set(ours)
    for name in theirs:
        if not name.startswith("after/actor_target/"):
            assert_same(ours[name], theirs[name], name)
    tau = cfg.tau
    actor_before = flat("", state.actor.params)
    for name, target in flat("", state.actor.target_params).items():
        before = actor_before[name]
        after = before - ours[f"grad/actor{name}"]
        assert_same(theirs[f"after/actor_target{name}"], (1 - tau) * target + tau * before, name)
        assert_same(ours[f"after/actor_target{name}"], (1 - tau) * target + tau * after, name)
        assert np.abs(after - before).max() > 1e-3  # the two differ: the actor did move
