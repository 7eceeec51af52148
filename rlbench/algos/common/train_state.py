"""The train state of one network: parameters and optimizer, plus what its training passes read.

Every algorithm keeps one of these per network (actor, critic). They hide one implementation detail
of bfloat16 training on the CPU (networks/plain_layout.py): a plain-layout network needs W^T of its
current kernels as data. `kernels_t` holds that copy (None for a float32 network), `apply_gradients`
refreshes it after every optimizer step, and `apply_training` passes it in, with the plain-layout flag.
An update therefore differentiates `state.critic.apply_training(params, obs, action, ...)` and reads as
its algorithm's math, whatever the precision.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Self

import jax.numpy as jnp
import optax
from flax import struct
from flax.training.train_state import TrainState

from rlbench.networks.mlp import NetworkConfig, plain_layout_applies
from rlbench.networks.plain_layout import KERNELS_T, transposed_kernels
from rlbench.types import Params


class NetworkState(TrainState):
    kernels_t: Params | None  # W^T (bfloat16) of every trunk kernel when the network trains in plain layout

    @classmethod
    def for_network(
        cls,
        config: NetworkConfig,
        apply_fn: Callable[..., Any],
        params: Params,
        tx: optax.GradientTransformation,
        **fields: Any,
    ) -> Self:
        """The state of a freshly initialised network whose architecture and precision `config` gives."""
        kernels_t = transposed_kernels(params) if plain_layout_applies(config) else None
        # flax leaves TrainState.create unannotated; it returns an instance of `cls`.
        state: Self = cls.create(  # type: ignore[no-untyped-call]
            apply_fn=apply_fn, params=params, tx=tx, kernels_t=kernels_t, **fields
        )
        # An int32 array rather than TrainState's Python 0: lax.cond's branches must agree on types.
        return state.replace(step=jnp.zeros((), jnp.int32))

    def variables(self, params: Params | None = None) -> dict[str, Params]:
        """The Flax variables of the network with `params` (default: its own)."""
        return {"params": self.params if params is None else params}

    def apply_training(self, params: Params, *args: Any, **kwargs: Any) -> Any:
        """`apply_fn` on `params`, the parameters being differentiated, in plain layout when it applies."""
        variables = self.variables(params)
        if self.kernels_t is not None:
            variables[KERNELS_T] = self.kernels_t
        return self.apply_fn(variables, *args, plain_layout=self.kernels_t is not None, **kwargs)

    def apply_gradients(self, *, grads: Params, **kwargs: Any) -> Self:
        """One optimizer step; W^T follows the new parameters, so the next step reads W^T of what it
        differentiates (tests/unit/test_precision.py)."""
        # flax leaves TrainState.apply_gradients unannotated; it returns `self.replace(...)`, of this class.
        state: Self = super().apply_gradients(grads=grads, **kwargs)  # type: ignore[no-untyped-call]
        if state.kernels_t is None:
            return state
        return state.replace(kernels_t=transposed_kernels(state.params))


class TargetCriticState(NetworkState):
    """A critic and its Polyak-averaged copy, read by the TD target (SAC, TQC)."""

    target_params: Params


class NormalizedState(NetworkState):
    """A network with BatchRenorm (CrossQ): its running statistics are variables of every pass."""

    batch_stats: Params = struct.field(default_factory=dict)

    def variables(self, params: Params | None = None) -> dict[str, Params]:
        return {**super().variables(params), "batch_stats": self.batch_stats}
