"""Brax's and MuJoCo Playground's envs through rlbench.envs.jax_native: their State protocol under the vector
layer, and the ConfigErrors of their ids and kwargs. Their physics compile for tens of seconds on a CPU: the
default suite steps Brax's `fast` test env only; the physics envs are `slow`."""

import sys
import tomllib
import warnings
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from rlbench.envs.jax_native.gym_env import JaxGymEnv
from rlbench.envs.jax_native.ids import JAX_ENV_PREFIXES, make_jax_env
from rlbench.envs.jax_native.vector import reset_envs, step_envs, step_envs_in_bounds
from rlbench.errors import ConfigError
from tests.conftest import REPO_ROOT


def scan_steps(env, seeds, actions):
    def body(carry, action):
        carry, out = step_envs(env, carry, action)
        return carry, (out, carry.elapsed)

    carry = reset_envs(env, jnp.asarray(seeds, jnp.int32))
    return jax.jit(lambda c, a: jax.lax.scan(body, c, a))(carry, jnp.asarray(actions, jnp.float32))


def test_brax_state_protocol_under_the_vector_layer():
    pytest.importorskip("brax")
    env = make_jax_env("brax:fast", {"episode_length": 3})
    assert env.max_episode_steps == 3 and env.spec.obs_dim == 2
    np.testing.assert_array_equal(env.action_low, -np.ones(env.spec.action_dim, np.float32))
    _, (outs, elapsed) = scan_steps(env, [0, 1], np.ones((5, 2, env.spec.action_dim)))
    np.testing.assert_array_equal(np.asarray(outs.truncated[:, 0]), [0, 0, 1, 0, 0])
    np.testing.assert_array_equal(np.asarray(elapsed[:, 0]), [1, 2, 0, 1, 2])
    # `fast` moves by dt * (action > 0) a step: position then velocity, 0.02 per step of velocity.
    np.testing.assert_allclose(np.asarray(outs.final_obs[2, 0]), [0.0004 + 0.0008 + 0.0012, 0.06], rtol=1e-5)
    np.testing.assert_array_equal(np.asarray(outs.next_obs[2, 0]), [0.0, 0.0])  # restarted
    np.testing.assert_array_equal(np.asarray(outs.final_obs[:2]), np.asarray(outs.next_obs[:2]))


@pytest.mark.parametrize(
    ("env_id", "kwargs", "expected"),
    [
        ("brax:halfchetah", None, "brax has no environment 'halfchetah'; did you mean brax:halfcheetah"),
        ("brax:halfcheetah", {"bakend": "mjx"}, "has no parameter 'bakend'; valid: .*backend, n_frames"),
        ("brax:halfcheetah", {"backend": "bullet"}, "backend 'bullet' is not one of generalized, positional"),
        ("brax:halfcheetah", {"episode_length": 0}, "episode_length must be a positive integer"),
        ("playground:CheetahRn", None, "playground has no environment 'CheetahRn'; did you mean playground:CheetahRun"),
        ("playground:CheetahRun", {"episode_len": 9}, "has no parameter 'episode_len'; valid: .*episode_length"),
    ],
)
def test_bad_brax_and_playground_ids_and_kwargs(env_id, kwargs, expected):
    pytest.importorskip("brax" if env_id.startswith("brax") else "mujoco_playground")
    with pytest.raises(ConfigError, match=expected) as caught:
        make_jax_env(env_id, kwargs)
    assert "\n" not in str(caught.value)


@pytest.mark.slow
def test_playground_physics_env_steps_and_truncates():
    pytest.importorskip("mujoco_playground")
    env = make_jax_env("playground:PendulumSwingup", {"episode_length": 2})
    assert env.spec.obs_dim == 3 and env.spec.action_dim == 1 and env.render is not None
    _, (outs, _) = scan_steps(env, [0, 0], np.full((3, 2, 1), 0.5))
    np.testing.assert_array_equal(np.asarray(outs.truncated[:, 0]), [0, 1, 0])
    np.testing.assert_array_equal(np.asarray(outs.final_obs[:, 0]), np.asarray(outs.final_obs[:, 1]))
    assert np.isfinite(np.asarray(outs.reward)).all()


@pytest.mark.slow
def test_brax_physics_env_through_the_gymnasium_view():
    pytest.importorskip("brax")
    env = make_jax_env("brax:halfcheetah", {"backend": "positional", "episode_length": 4})
    # Jitted as JaxGymEnv's are: a physics step run op by op (or fused differently inside a larger program)
    # rounds differently in the last bits.
    carry = jax.jit(lambda seeds: reset_envs(env, seeds))(jnp.array([5], jnp.int32))
    gym_env = JaxGymEnv(env)
    np.testing.assert_array_equal(gym_env.reset(seed=5)[0], np.asarray(carry.obs[0]))
    actions = np.random.default_rng(0).uniform(-1, 1, (6, 1, 6)).astype(np.float32)
    step = jax.jit(lambda c, a: step_envs_in_bounds(env, c, a))
    for action in actions:
        carry, out = step(carry, action)
        obs, reward, terminated, truncated, _ = gym_env.step(action[0])
        np.testing.assert_array_equal(obs, np.asarray(out.final_obs[0]))
        assert (reward, terminated, truncated) == (float(out.reward[0]), False, bool(out.truncated[0]))
        if truncated:
            np.testing.assert_array_equal(gym_env.reset()[0], np.asarray(out.next_obs[0]))


def test_mujoco_warnings_become_python_warnings_not_stdout_or_a_log_file(tmp_path, monkeypatch, capfd):
    pytest.importorskip("brax")
    monkeypatch.chdir(tmp_path)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        make_jax_env("brax:halfcheetah", {"episode_length": 17})  # its XML's settotalmass: deprecated in MuJoCo 4
    assert capfd.readouterr().out == ""
    assert not (tmp_path / "MUJOCO_LOG.TXT").exists()
    assert any("brax:halfcheetah: MuJoCo: " in str(warning.message) for warning in caught)


@pytest.mark.parametrize(
    ("prefix", "package", "extra"),
    [("gymnax", "gymnax", "gymnax"), ("brax", "brax", "brax"), ("playground", "mujoco_playground", "playground")],
)
def test_a_missing_package_names_its_own_extra(monkeypatch, prefix, package, extra):
    """A gymnax user is told to install the gymnax extra, not jax-envs (Playground's NVIDIA Warp with it)."""
    monkeypatch.setitem(sys.modules, package, None)  # `import package` raises ImportError
    with pytest.raises(ConfigError) as caught:
        make_jax_env(f"{prefix}:NoSuchEnv-v0")
    message = str(caught.value)
    assert message.startswith(f"environment '{prefix}:NoSuchEnv-v0' needs the package '{package}'")
    assert message.endswith(f'pip install -e ".[{extra}]"') and "\n" not in message


def test_pyproject_has_an_extra_per_package_and_jax_envs_is_their_union():
    extras = tomllib.loads((Path(REPO_ROOT) / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    union = set()
    for prefix, (_, extra) in JAX_ENV_PREFIXES.items():
        names = {requirement.split("=")[0].split(">")[0] for requirement in extras[extra]}
        assert prefix in names, extras[extra]  # each prefix is its package's name on PyPI
        union |= set(extras[extra])
    assert "playground==0.2.0" not in extras["gymnax"] + extras["brax"]  # Warp only for Playground
    assert sorted(extras["jax-envs"]) == sorted(union)
