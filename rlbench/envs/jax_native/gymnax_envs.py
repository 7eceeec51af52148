"""gymnax's classic-control and MinAtar envs as JaxEnvs (`gymnax:Pendulum-v1`, `gymnax:Breakout-MinAtar`; MinAtar's
image observations [10, 10, channels] flattened, as every observation here).

gymnax's own `step` autoresets and its `is_terminal` counts the time limit as an end, both of which rlbench's
vector layer does itself (a time limit truncates, it does not terminate). So the env is stepped with
`step_env` (no autoreset) and its termination is rlbench's reading of each env's `is_terminal` without the
time limit: only the envs read that way are run. Env kwargs are fields of the env's EnvParams. A Discrete
env takes its action as the index in the loop's one float action column (rlbench.envs.discrete), cast to
gymnax's integer action here.
"""

from __future__ import annotations

import dataclasses
import reprlib
from collections.abc import Callable
from typing import Any, Protocol

import jax
import jax.numpy as jnp
import numpy as np

from rlbench.envs.jax_native.env import JaxEnv, conformed, traced_reset
from rlbench.envs.jax_native.packages import (
    JAX_ENV_PREFIXES,
    import_env_package,
    kwargs_error,
    positive_int,
    unknown_env_error,
    unknown_kwarg_error,
)
from rlbench.errors import ConfigError
from rlbench.types import EnvSpec, PyTree

# An env's termination from its state and EnvParams (both gymnax struct dataclasses).
Termination = Callable[[PyTree, PyTree], jax.Array]


class GymnaxEnv(Protocol):
    """What is used of a gymnax environment (gymnax.environments.environment.Environment)."""

    def action_space(self, params: PyTree) -> Any: ...  # a gymnax space: Box or Discrete

    def reset_env(self, key: jax.Array, params: PyTree) -> tuple[jax.Array, PyTree]: ...

    def step_env(
        self, key: jax.Array, state: PyTree, action: jax.Array, params: PyTree
    ) -> tuple[jax.Array, PyTree, jax.Array, jax.Array, dict[str, Any]]: ...


def _never(state: PyTree, params: PyTree) -> jax.Array:
    return jnp.array(False)


def _mountain_car_goal(state: PyTree, params: PyTree) -> jax.Array:
    return (state.position >= params.goal_position) & (state.velocity >= params.goal_velocity)


def _cart_pole_fell(state: PyTree, params: PyTree) -> jax.Array:
    cart_out = (state.x < -params.x_threshold) | (state.x > params.x_threshold)
    pole_out = (state.theta < -params.theta_threshold_radians) | (state.theta > params.theta_threshold_radians)
    return cart_out | pole_out


def _acrobot_swung_up(state: PyTree, params: PyTree) -> jax.Array:
    return -jnp.cos(state.joint_angle1) - jnp.cos(state.joint_angle2 + state.joint_angle1) > 1.0


def _minatar_game_over(state: PyTree, params: PyTree) -> jax.Array:
    """MinAtar's step stores `terminal` = game over or time limit: the time limit taken out. A game that ends on
    the time limit's very step reads as truncated (the state keeps no separate record of it)."""
    return state.terminal & (state.time < params.max_steps_in_episode)


# Each env's termination, read from its is_terminal with the time limit taken out (gymnax 0.0.9): a time
# limit alone ends Pendulum, Reacher, Swimmer, PointRobot and Freeway-MinAtar episodes.
TERMINATION: dict[str, Termination] = {
    "Pendulum-v1": _never,
    "MountainCarContinuous-v0": _mountain_car_goal,
    "CartPole-v1": _cart_pole_fell,
    "Acrobot-v1": _acrobot_swung_up,
    "MountainCar-v0": _mountain_car_goal,
    "Reacher-misc": _never,
    "Swimmer-misc": _never,
    "PointRobot-misc": _never,
    "Asterix-MinAtar": _minatar_game_over,
    "Breakout-MinAtar": _minatar_game_over,
    "SpaceInvaders-MinAtar": _minatar_game_over,
    "Freeway-MinAtar": _never,
}


def make_gymnax_env(env_id: str, name: str, env_kwargs: dict[str, Any]) -> JaxEnv:
    gymnax = import_env_package(env_id, *JAX_ENV_PREFIXES["gymnax"])
    if name not in gymnax.registered_envs:
        raise unknown_env_error(env_id, gymnax.registered_envs, sorted(TERMINATION))
    if name not in TERMINATION:
        raise ConfigError(
            f"environment {env_id!r}: rlbench does not know this env's termination condition yet "
            f"(gymnax envs it runs: {', '.join('gymnax:' + n for n in sorted(TERMINATION))})"
        )
    env, params = gymnax.make(name)
    params = _with_kwargs(env_id, params, env_kwargs)
    return _jax_env(env_id, env, params, TERMINATION[name], env_kwargs)


def _with_kwargs(env_id: str, params: PyTree, env_kwargs: dict[str, Any]) -> PyTree:
    names = [field.name for field in dataclasses.fields(params)]
    for key, value in env_kwargs.items():
        if key not in names:
            raise unknown_kwarg_error(env_id, key, names)
        default = getattr(params, key)
        if isinstance(default, bool) and not isinstance(value, bool):
            raise ConfigError(f"env_kwargs: {env_id}'s {key} must be True or False, got {reprlib.repr(value)}")
        if not isinstance(default, bool) and (isinstance(value, bool) or not isinstance(value, int | float)):
            raise ConfigError(f"env_kwargs: {env_id}'s {key} must be a number, got {reprlib.repr(value)}")
    positive_int(env_id, "max_steps_in_episode", env_kwargs.get("max_steps_in_episode", params.max_steps_in_episode))
    return params.replace(**env_kwargs)


def _jax_env(
    env_id: str, env: GymnaxEnv, params: PyTree, terminated: Termination, env_kwargs: dict[str, Any]
) -> JaxEnv:
    space = env.action_space(params)
    action_shape = tuple(space.shape) or (1,)
    n_actions = int(space.n) if type(space).__name__ == "Discrete" else 0

    def reset_raw(key: jax.Array) -> tuple[PyTree, jax.Array]:
        obs, state = env.reset_env(key, params)
        return state, jnp.ravel(obs).astype(jnp.float32)

    reset, state_shape, obs_shape = traced_reset(reset_raw, lambda error: kwargs_error(env_id, env_kwargs, error))

    def step(state: PyTree, action: jax.Array, key: jax.Array) -> tuple[PyTree, jax.Array, jax.Array, jax.Array]:
        action = jnp.reshape(action, space.shape)
        if n_actions:  # the index, exact in float32 (n < 2**24)
            action = action.astype(jnp.int32)
        obs, state, reward, _, _ = env.step_env(key, state, action, params)  # its `done` counts the time limit
        state = conformed(state, state_shape)
        return state, jnp.ravel(obs).astype(jnp.float32), jnp.asarray(reward, jnp.float32), terminated(state, params)

    try:
        jax.eval_shape(step, state_shape, jax.ShapeDtypeStruct(space.shape, jnp.float32), jax.random.key(0))
    except Exception as error:
        raise kwargs_error(env_id, env_kwargs, error) from None
    if n_actions:  # the index column's bounds (rlbench.envs.discrete)
        low, high = np.zeros(1, np.float32), np.full(1, n_actions - 1, np.float32)
    else:
        with np.errstate(over="ignore"):  # bounds beyond float32 (max_torque: 1e308) become inf: refused by the probe
            low = np.broadcast_to(np.asarray(space.low, np.float32), action_shape).copy()
            high = np.broadcast_to(np.asarray(space.high, np.float32), action_shape).copy()
    return JaxEnv(
        env_id=env_id,
        spec=EnvSpec(obs_dim=int(obs_shape.shape[0]), action_dim=int(np.prod(action_shape)), n_actions=n_actions),
        action_low=low,
        action_high=high,
        max_episode_steps=int(params.max_steps_in_episode),
        reset=reset,
        step=step,
    )
