"""rlbench's SAC and TQC gradient steps are SBX's: from the same parameters, batch and Gaussian noise, one
step of each (critic, Polyak update, actor, temperature) gives the same losses and the same gradient of
every parameter, SBX's computed by SBX's own update functions in the peer's venv (tests/peer/sbx_step.py).

Both steps run with SGD at learning rate 1 in place of Adam (Adam's first step is lr * sign(g), blind to a
gradient's size), so each parameter's change is minus its gradient. Both draw their Gaussian noise through
`jax.random.normal`, which the test hands the same two draws. The temperature gradient is the check that
this comparison can fail: with `temperature_loss: alpha` (SBX's loss before 0.18) rlbench's gradient in
log alpha is SBX's times alpha, as the two losses say.

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

from rlbench.algos.registry import ALGORITHMS
from rlbench.bench.row import bench_config
from rlbench.types import EnvSpec, Transition
from tests.conftest import REPO_ROOT

PEER_STEP = Path(REPO_ROOT) / "tests" / "peer" / "sbx_step.py"
OBS_DIM, ACTION_DIM, BATCH = 5, 3, 64
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


def flat(prefix: str, tree) -> dict[str, np.ndarray]:
    return {f"{prefix}/{k}": np.asarray(v) for k, v in traverse_util.flatten_dict(tree, sep="/").items()}


def start_state(algo, cfg):
    """The initial state, with alpha != 1 and the target critic apart from the critic (so that both terms
    of the TD target are exercised), and SGD as every optimizer: at learning rate 1, except TQC's critic
    at n_critics, which takes SBX's critic step from rlbench's mean of the critics' losses."""
    state = ALGORITHMS[algo].make_learner(cfg, EnvSpec(OBS_DIM, ACTION_DIM)).init_fn(jax.random.key(0))
    target = jax.tree.map(
        lambda p: p + 0.01 * jax.random.normal(jax.random.key(1), p.shape), state.critic.target_params
    )

    def with_sgd(s, params=None, learning_rate=1.0):
        params = s.params if params is None else params
        sgd = optax.sgd(learning_rate)
        return s.replace(params=params, tx=sgd, opt_state=sgd.init(params))

    critic_learning_rate = float(cfg.n_critics) if algo == "tqc" else 1.0
    return state.replace(
        actor=with_sgd(state.actor),
        critic=with_sgd(state.critic, learning_rate=critic_learning_rate).replace(target_params=target),
        temperature=with_sgd(state.temperature, {"log_alpha": jnp.asarray(LOG_ALPHA, jnp.float32)}),
    )


def log_alpha(state) -> jax.Array:
    return state.temperature.params["log_alpha"]


def rlbench_step(algo, cfg, state, inputs, monkeypatch) -> dict[str, np.ndarray]:
    noise = [inputs["noise/critic"], inputs["noise/actor"]]

    def given_normal(key, shape=(), dtype=jnp.float32):
        assert tuple(shape) == (BATCH, ACTION_DIM)
        return jnp.asarray(noise.pop(0), dtype)

    learner = ALGORITHMS[algo].make_learner(cfg, EnvSpec(OBS_DIM, ACTION_DIM))
    batch = Transition(**{k.removeprefix("batch/"): jnp.asarray(v) for k, v in inputs.items() if "batch/" in k})
    with monkeypatch.context() as patch, jax.disable_jit():
        patch.setattr(jax.random, "normal", given_normal)
        after_critic, critic_metrics = learner.critic_step_fn(state, batch, jax.random.key(2))
        after_actor, actor_metrics = learner.actor_step_fn(after_critic, batch, jax.random.key(3))
    assert not noise
    minus = lambda a, b: jax.tree.map(lambda x, y: x - y, a, b)  # noqa: E731
    return {
        **flat("grad/critic", minus(state.critic.params, after_critic.critic.params)),
        **flat("grad/actor", minus(after_critic.actor.params, after_actor.actor.params)),
        **flat("after/target", after_critic.critic.target_params),
        "grad/log_alpha": np.asarray(log_alpha(state) - log_alpha(after_actor)),
        "loss/critic": np.asarray(critic_metrics["train/critic_loss"]),
        "loss/actor": np.asarray(actor_metrics["train/actor_loss"]),
        "loss/temperature": np.asarray(actor_metrics["train/ent_coef_loss"]),
    }


def sbx_step(peer: str, algo, cfg, state, inputs, tmp_path) -> dict[str, np.ndarray]:
    given = {
        **inputs,
        **flat("init/actor", state.actor.params),
        **flat("init/critic", state.critic.params),
        **flat("init/target", state.critic.target_params),
        "init/log_alpha": np.asarray(state.temperature.params["log_alpha"]),
        "gamma": np.asarray(cfg.gamma),
        "tau": np.asarray(cfg.tau),
    }
    np.savez(tmp_path / "given.npz", **given)
    done = subprocess.run(
        [peer, str(PEER_STEP), algo, str(tmp_path / "given.npz"), str(tmp_path / "sbx.npz")],
        capture_output=True,
        text=True,
        timeout=300,
        env={"JAX_PLATFORMS": "cpu", "PATH": "/usr/bin:/bin"},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return dict(np.load(tmp_path / "sbx.npz"))


def assert_same(ours: np.ndarray, theirs: np.ndarray, name: str) -> None:
    # float32 sums in another order: a few ulps of the leaf's largest entry apart, no more.
    np.testing.assert_allclose(ours, theirs, rtol=0, atol=2e-5 * np.abs(theirs).max() + 1e-9, err_msg=name)


@pytest.mark.slow  # about 25 s each: the peer imports SBX, tfp and RL Zoo's torch, then steps eagerly
@pytest.mark.parametrize("algo", ["sac", "tqc"])
def test_one_gradient_step_equals_sbx_s_from_the_same_parameters_batch_and_noise(
    algo, peer_python, tmp_path, monkeypatch
):
    cfg = bench_config(algo, 1, [256, 256])
    inputs = fixed_inputs()
    state = start_state(algo, cfg)
    theirs = sbx_step(peer_python, algo, cfg, state, inputs, tmp_path)
    ours = rlbench_step(algo, cfg, state, inputs, monkeypatch)

    assert set(theirs) == set(ours)
    assert len([k for k in theirs if k.startswith("grad/")]) == 6 + 8 + 1  # critic, actor, log alpha
    for name in theirs:
        assert_same(ours[name], theirs[name], name)
    assert np.abs(theirs["grad/log_alpha"]) > 0.1  # a real gradient, not a vanishing one

    # The same comparison sees a difference where there is one: SBX's loss before 0.18.
    before_018 = dataclasses.replace(cfg, temperature_loss="alpha")
    alpha_loss = rlbench_step(algo, before_018, state, inputs, monkeypatch)
    assert not np.allclose(alpha_loss["grad/log_alpha"], theirs["grad/log_alpha"], rtol=0.1)
    np.testing.assert_allclose(alpha_loss["grad/log_alpha"], np.exp(LOG_ALPHA) * theirs["grad/log_alpha"], rtol=1e-5)
