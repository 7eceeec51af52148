"""The on-policy rollout: SB3's env-major flattening, and the tests' step-by-step rollouts (tests/ppo_rollouts.py,
which the PPO tests build on) write each step where it belongs."""

import jax
import jax.numpy as jnp
import numpy as np

from rlbench.buffers.rollout import RolloutStep, flatten_env_major
from tests.ppo_rollouts import add_step, init_rollout, is_full

N_STEPS, N_ENVS, OBS_DIM = 3, 2, 4


def vector_step(t: int, action_shape=(2,), action_dtype=jnp.float32) -> RolloutStep:
    """Step t of both envs, every number encoding (t, env) so a misplaced write shows."""
    tag = jnp.array([10.0 * t, 10.0 * t + 1])  # env 0, env 1
    return RolloutStep(
        obs=jnp.broadcast_to(tag[:, None], (N_ENVS, OBS_DIM)),
        action=jnp.broadcast_to(tag.reshape(N_ENVS, *([1] * len(action_shape))), (N_ENVS, *action_shape)).astype(
            action_dtype
        ),
        reward=tag + 0.5,
        terminated=jnp.array([0.0, 1.0]),
        truncated=jnp.array([1.0, 0.0]),
        final_value=tag + 0.25,
        value=tag + 0.75,
        log_prob=-tag,
    )


def filled(action_shape=(2,), action_dtype=jnp.float32):
    state = init_rollout(N_STEPS, N_ENVS, OBS_DIM, action_shape, action_dtype)
    add = jax.jit(add_step)
    for t in range(N_STEPS):
        state = add(state, vector_step(t, action_shape, action_dtype), jnp.full((N_ENVS, OBS_DIM), 100.0 + t))
    return state


def test_init_has_the_rollout_shapes_and_is_empty():
    state = init_rollout(N_STEPS, N_ENVS, OBS_DIM, (2,))
    assert state.steps.obs.shape == (N_STEPS, N_ENVS, OBS_DIM)
    assert state.steps.action.shape == (N_STEPS, N_ENVS, 2)
    for column in (state.steps.reward, state.steps.value, state.steps.log_prob, state.steps.final_value):
        assert column.shape == (N_STEPS, N_ENVS) and column.dtype == jnp.float32
    assert state.last_obs.shape == (N_ENVS, OBS_DIM)
    assert int(state.position) == 0 and not bool(is_full(state))


def test_add_step_writes_each_step_at_its_row_and_keeps_the_newest_obs():
    state = filled()
    assert int(state.position) == N_STEPS and bool(is_full(state))
    for t in range(N_STEPS):
        np.testing.assert_array_equal(state.steps.reward[t], [10.0 * t + 0.5, 10.0 * t + 1.5])
        np.testing.assert_array_equal(state.steps.obs[t, 1], 10.0 * t + 1)
        np.testing.assert_array_equal(state.steps.log_prob[t], [-10.0 * t, -10.0 * t - 1])
    np.testing.assert_array_equal(state.steps.terminated[:, 1], 1.0)
    np.testing.assert_array_equal(state.last_obs, 100.0 + N_STEPS - 1)


def test_discrete_actions_are_stored_as_integers():
    state = filled(action_shape=(), action_dtype=jnp.int32)
    assert state.steps.action.shape == (N_STEPS, N_ENVS) and state.steps.action.dtype == jnp.int32
    np.testing.assert_array_equal(state.steps.action[2], [20, 21])


def test_flatten_is_env_major_as_sb3_swap_and_flatten():
    flat = flatten_env_major(filled().steps)
    # sample i is env i // n_steps at step i % n_steps: env 0's steps 0, 1, 2, then env 1's
    np.testing.assert_array_equal(flat.reward, [0.5, 10.5, 20.5, 1.5, 11.5, 21.5])
    assert flat.obs.shape == (N_STEPS * N_ENVS, OBS_DIM) and flat.action.shape == (N_STEPS * N_ENVS, 2)
    np.testing.assert_array_equal(flat.obs[4], 11.0)
