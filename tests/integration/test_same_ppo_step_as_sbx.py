"""rlbench's PPO minibatch step is SBX's: from the same parameters, minibatch (observations, actions, advantages,
returns, old log-probabilities far enough from the current ones that the clip is active on some samples) and
settings, one step of rlbench's fused update (rlbench.algos.ppo.update.minibatch_step) and one of SBX's own
`PPO._one_update` (tests/peer/sbx_ppo_step.py, in the peer's venv) give the same losses and the same gradient
of every parameter, for a Gaussian (Box) and a Categorical (Discrete) policy.

Both steps run with SGD at learning rate 1, so each parameter's change is minus its gradient. SBX keeps two
optimizers (actor and value network) and rlbench one, on the summed loss, as SB3; the networks share no
parameter, so the gradients are the same. What differs, and stays out of this comparison: SBX normalizes the
advantages with the population std (ddof 0), SB3 and rlbench with PyTorch's sample std (ddof 1); and each
of SBX's optimizers clips its own gradient's norm, SB3's and rlbench's the joint one (max_grad_norm is set
out of reach here).
"""

import subprocess
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from flax import traverse_util

from rlbench.algos.ppo.losses import LossSettings, Minibatch
from rlbench.algos.ppo.update import StepCarry, minibatch_step
from rlbench.config.registry import get_algo
from rlbench.types import EnvSpec
from tests.conftest import REPO_ROOT

PEER_STEP = Path(REPO_ROOT) / "tests" / "peer" / "sbx_ppo_step.py"
OBS_DIM, BATCH, CLIP_RANGE, ENT_COEF, VF_COEF = 5, 64, 0.1, 0.01, 0.5
CASES = {"box": EnvSpec(OBS_DIM, 3), "discrete": EnvSpec(OBS_DIM, 1, n_actions=4)}


def config():
    keys = {"n_steps": BATCH, "batch_size": BATCH, "max_grad_norm": 1e9, "normalize_advantage": False}
    return get_algo("ppo").build_config(keys | {"policy_kwargs": {"net_arch": {"pi": [32, 16], "vf": [24]}}}, 1, "t")


def flat(tree) -> dict[str, np.ndarray]:
    return {k: np.asarray(v) for k, v in traverse_util.flatten_dict(tree, sep="/").items()}


def case_inputs(spec: EnvSpec):
    """The policy (SGD at learning rate 1) and a minibatch whose old log-probabilities come from parameters
    moved away from the policy's: the ratio is not 1, and the clip binds on some samples."""
    from rlbench.algos.ppo.learner import make_learner

    state = make_learner(config(), spec).init_fn(jax.random.key(0))
    policy = state.policy.replace(tx=optax.sgd(1.0), opt_state=optax.sgd(1.0).init(state.policy.params))
    rng = np.random.default_rng(1)
    obs = rng.normal(size=(BATCH, OBS_DIM)).astype(np.float32)
    if spec.discrete:
        action = rng.integers(0, spec.n_actions, BATCH).astype(np.int32)
    else:
        action = rng.normal(size=(BATCH, spec.action_dim)).astype(np.float32)
    moved = jax.tree.map(lambda p: p + 0.05 * jax.random.normal(jax.random.key(2), p.shape), policy.params)
    distribution, _ = policy.apply_fn({"params": moved}, jnp.asarray(obs))
    batch = Minibatch(
        obs=jnp.asarray(obs),
        action=jnp.asarray(action),
        old_value=jnp.zeros(BATCH),
        old_log_prob=distribution.log_prob(jnp.asarray(action)),
        advantage=jnp.asarray(rng.normal(size=BATCH).astype(np.float32)),
        returns=jnp.asarray(rng.normal(size=BATCH).astype(np.float32)),
    )
    return policy, batch


def rlbench_step(policy, batch) -> dict[str, np.ndarray]:
    settings = LossSettings(jnp.float32(CLIP_RANGE), None, ENT_COEF, VF_COEF, normalize_advantage=False)
    carry = StepCarry(policy=policy, going=jnp.array(True), steps_taken=jnp.zeros((), jnp.int32))
    after, (metrics, _) = jax.jit(lambda c, b: minibatch_step(config(), settings, c, b))(carry, batch)
    before, moved = flat(policy.params), flat(after.policy.params)
    clip_fraction = float(metrics["train/clip_fraction"])
    assert 0.1 < clip_fraction < 0.9, clip_fraction  # both branches of the clipped surrogate are exercised
    return {
        **{f"grad/{name}": before[name] - moved[name] for name in before},
        "loss/policy_gradient": np.asarray(metrics["train/policy_gradient_loss"]),
        "loss/entropy": np.asarray(metrics["train/entropy_loss"]),
        "loss/value_times_vf_coef": VF_COEF * np.asarray(metrics["train/value_loss"]),
    }


def given_to_sbx(spec: EnvSpec, policy, batch) -> dict[str, np.ndarray]:
    cfg = config()
    return {
        **{f"init/{name}": value for name, value in flat(policy.params).items()},
        **{f"batch/{name}": np.asarray(value) for name, value in batch._asdict().items() if value is not None},
        "discrete": np.asarray(spec.discrete),
        "n_actions": np.asarray(spec.n_actions if spec.discrete else spec.action_dim),
        "net_arch/pi": np.asarray(cfg.network.pi),
        "net_arch/vf": np.asarray(cfg.network.vf),
        "clip_range": np.asarray(CLIP_RANGE),
        "ent_coef": np.asarray(ENT_COEF),
        "vf_coef": np.asarray(VF_COEF),
        "normalize_advantage": np.asarray(False),
    }


@pytest.fixture(scope="module")
def sbx_steps(peer_python, tmp_path_factory):
    folder = tmp_path_factory.mktemp("sbx_ppo")
    command, inputs = [peer_python, str(PEER_STEP)], {}
    for name, spec in CASES.items():
        inputs[name] = case_inputs(spec)
        np.savez(folder / f"given_{name}.npz", **given_to_sbx(spec, *inputs[name]))
        command += [str(folder / f"given_{name}.npz"), str(folder / f"sbx_{name}.npz")]
    env = {"JAX_PLATFORMS": "cpu", "PATH": "/usr/bin:/bin"}
    done = subprocess.run(command, capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    return {name: (inputs[name], dict(np.load(folder / f"sbx_{name}.npz"))) for name in CASES}


@pytest.mark.slow  # the peer's process: ~15 s of imports and SBX's compilation
@pytest.mark.parametrize("case", list(CASES))
def test_one_ppo_minibatch_step_equals_sbxs(sbx_steps, case):
    (policy, batch), sbx = sbx_steps[case]
    ours = rlbench_step(policy, batch)
    assert set(ours) == set(sbx)
    for name in sorted(ours):
        np.testing.assert_allclose(ours[name], sbx[name], rtol=2e-4, atol=1e-6, err_msg=name)
    assert np.abs(ours["grad/action_head/Dense_0/kernel"]).max() > 1e-3  # a step that moved the policy
