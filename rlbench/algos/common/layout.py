"""The train state's W^T copies for plain-layout bfloat16 networks (see networks/plain_layout.py).

`TransposedKernels` holds, per network, the `kernels_t` collection of its current parameters, or None
for a float32 network (no plain-layout pass). Every step that
changes a network's parameters refreshes its copy right after the optimizer step, so the copy the next
step reads is always W^T of the parameters it differentiates.
"""

from __future__ import annotations

from typing import Any

from flax import struct

from rlbench.networks.mlp import NetworkConfig, plain_layout_applies
from rlbench.networks.plain_layout import KERNELS_T, transposed_kernels
from rlbench.types import Params


class TransposedKernels(struct.PyTreeNode):
    actor: Params | None
    critic: Params | None


def init_transposed(
    actor: NetworkConfig, critic: NetworkConfig, actor_params: Params, critic_params: Params
) -> TransposedKernels | None:
    """None when neither network takes the plain-layout path (then nothing changes in the state)."""
    if not (plain_layout_applies(actor) or plain_layout_applies(critic)):
        return None
    return TransposedKernels(
        actor=transposed_kernels(actor_params) if plain_layout_applies(actor) else None,
        critic=transposed_kernels(critic_params) if plain_layout_applies(critic) else None,
    )


def actor_kernels_t(transposed: TransposedKernels | None) -> Params | None:
    return None if transposed is None else transposed.actor


def critic_kernels_t(transposed: TransposedKernels | None) -> Params | None:
    return None if transposed is None else transposed.critic


def with_kernels_t(variables: dict[str, Any], kernels_t: Params | None) -> dict[str, Any]:
    """Flax variables for a training pass: plain layout (`plain_layout=kernels_t is not None`) when given."""
    return variables if kernels_t is None else {**variables, KERNELS_T: kernels_t}


def refresh(
    transposed: TransposedKernels | None, *, actor: Params | None = None, critic: Params | None = None
) -> TransposedKernels | None:
    """The copies after an optimizer step changed `actor` and/or `critic` parameters."""
    if transposed is None:
        return None
    if actor is not None and transposed.actor is not None:
        transposed = transposed.replace(actor=transposed_kernels(actor))
    if critic is not None and transposed.critic is not None:
        transposed = transposed.replace(critic=transposed_kernels(critic))
    return transposed
