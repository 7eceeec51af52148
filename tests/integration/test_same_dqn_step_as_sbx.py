"""rlbench's DQN gradient step is SBX's: from the same Q-network, target network (moved away from it, so the
target matters) and batch (with terminations), one step of rlbench's (rlbench.algos.dqn.update.q_step) and one
of SBX's own `DQN.update_qnetwork` (tests/peer/sbx_dqn_step.py, in the peer's venv) give the same loss, mean Q
and gradient of every parameter. Both run SGD at learning rate 1 (each parameter's change is minus its
gradient) and no gradient clipping (SBX's DQN has none, nor rlbench's by default).
"""

import subprocess
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from flax import traverse_util

from rlbench.algos.dqn.update import q_step
from rlbench.config.registry import get_algo
from rlbench.types import EnvSpec, Transition
from tests.conftest import REPO_ROOT

PEER_STEP = Path(REPO_ROOT) / "tests" / "peer" / "sbx_dqn_step.py"
SPEC = EnvSpec(obs_dim=5, action_dim=1, n_actions=4)
BATCH, UNITS, GAMMA = 64, 32, 0.97


def flat(tree) -> dict[str, np.ndarray]:
    return {k: np.asarray(v) for k, v in traverse_util.flatten_dict(tree, sep="/").items()}


@pytest.mark.slow  # the peer's process: ~10 s of imports and SBX's compilation
def test_one_dqn_step_equals_sbxs(peer_python, tmp_path):
    cfg = get_algo("dqn").build_config(
        {"gamma": GAMMA, "max_grad_norm": None, "policy_kwargs": {"net_arch": [UNITS, UNITS]}}, 1, "test"
    )
    state = get_algo("dqn").make_learner(cfg, SPEC).init_fn(jax.random.key(0))
    target = jax.tree.map(lambda p: p + 0.1 * jax.random.normal(jax.random.key(1), p.shape), state.q.params)
    sgd = optax.sgd(1.0)
    state = state.replace(q=state.q.replace(tx=sgd, opt_state=sgd.init(state.q.params), target_params=target))
    rng = np.random.default_rng(2)
    batch = Transition(
        obs=rng.normal(size=(BATCH, SPEC.obs_dim)).astype(np.float32),
        action=rng.integers(0, SPEC.n_actions, (BATCH, 1)).astype(np.float32),
        reward=rng.normal(size=BATCH).astype(np.float32) * 3,  # some TD errors beyond Huber's delta
        next_obs=rng.normal(size=(BATCH, SPEC.obs_dim)).astype(np.float32),
        terminated=(np.arange(BATCH) % 4 == 0).astype(np.float32),
    )
    after, metrics = jax.jit(lambda s, b: q_step(cfg, s, b, jax.random.key(3)))(state, jax.tree.map(jnp.asarray, batch))
    before, moved = flat(state.q.params), flat(after.q.params)
    ours = {f"grad/{name}": before[name] - moved[name] for name in before}
    ours |= {"loss": np.asarray(metrics["train/loss"]), "q_mean": np.asarray(metrics["train/q_mean"])}

    given = {f"init/{k}": v for k, v in before.items()} | {f"target/{k}": v for k, v in flat(target).items()}
    given |= {f"batch/{k}": np.asarray(v) for k, v in batch._asdict().items() if v is not None}
    given |= {"n_actions": np.asarray(SPEC.n_actions), "n_units": np.asarray(UNITS), "gamma": np.asarray(GAMMA)}
    np.savez(tmp_path / "given.npz", **given)
    env = {"JAX_PLATFORMS": "cpu", "PATH": "/usr/bin:/bin"}
    command = [peer_python, str(PEER_STEP), str(tmp_path / "given.npz"), str(tmp_path / "sbx.npz")]
    done = subprocess.run(command, capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    sbx = dict(np.load(tmp_path / "sbx.npz"))
    assert set(ours) == set(sbx)
    for name in sorted(ours):
        np.testing.assert_allclose(ours[name], sbx[name], rtol=2e-4, atol=1e-6, err_msg=name)
    assert np.abs(ours["grad/q/kernel"]).max() > 1e-3  # a step that moved the network
