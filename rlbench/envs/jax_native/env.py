"""One JAX-native environment as the rest of rlbench sees it, whatever package it comes from."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np
import numpy.typing as npt

from rlbench.types import EnvSpec, PyTree

# A frame of an env state: uint8 [height, width, 3].
Render = Callable[[PyTree], npt.NDArray[np.uint8]]


@dataclass(frozen=True, eq=False)  # compared by identity: jit caches key on the functions it holds
class JaxEnv:
    """reset and step of ONE env, pure: no autoreset and no time limit (rlbench.envs.jax_native.vector adds
    both, and the action rescaling, in one place).

    reset(key) -> (env_state, obs[obs_dim] float32)
    step(env_state, action[action_dim] within [action_low, action_high], key)
        -> (env_state, obs, reward float32 scalar, terminated bool scalar)
    render(env_state) -> uint8 frame [height, width, 3], where the package can draw the env.
    """

    env_id: str  # e.g. "gymnax:Pendulum-v1"
    spec: EnvSpec  # flat float32 observations
    action_low: npt.NDArray[np.float32]  # [action_dim]: the env's own bounds
    action_high: npt.NDArray[np.float32]
    max_episode_steps: int  # the time limit (truncation), as the env's registration has it
    reset: Callable[[jax.Array], tuple[PyTree, jax.Array]]
    step: Callable[[PyTree, jax.Array, jax.Array], tuple[PyTree, jax.Array, jax.Array, jax.Array]]
    render: Render | None = None


def conformed(state: PyTree, shapes: PyTree) -> PyTree:
    """`state` with the shapes and (strong) dtypes of `shapes` (the reset state's, from jax.eval_shape): an env
    whose reset holds Python numbers (weak types) or squeezed arrays where its step returns others would
    otherwise change the type of a lax.scan carry."""

    def conform(leaf: jax.typing.ArrayLike, shape: jax.ShapeDtypeStruct) -> jax.Array:
        leaf = jnp.reshape(leaf, shape.shape)
        return leaf if jax.dtypes.issubdtype(shape.dtype, jax.dtypes.prng_key) else leaf.astype(shape.dtype)

    return jax.tree.map(conform, state, shapes)


def traced_reset(
    reset_raw: Callable[[jax.Array], tuple[PyTree, jax.Array]], kwargs_error: Callable[[Exception], Exception]
) -> tuple[Callable[[jax.Array], tuple[PyTree, jax.Array]], PyTree, jax.ShapeDtypeStruct]:
    """(reset with its state `conformed` to the traced reset's, the state's shapes, the observation's shape) of a
    package's raw reset, traced once without compiling; `kwargs_error(error)` when the env's kwargs cannot trace."""
    try:
        state_shapes, obs_shape = jax.eval_shape(reset_raw, jax.random.key(0))
    except Exception as error:  # a kwarg the env cannot compute with
        raise kwargs_error(error) from None

    def reset(key: jax.Array) -> tuple[PyTree, jax.Array]:
        state, obs = reset_raw(key)
        return conformed(state, state_shapes), obs

    return reset, state_shapes, obs_shape
