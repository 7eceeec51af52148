"""The interface every algorithm module returns: pure functions that the runner jits once each."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

import jax

from rlbench.buffers.uniform import BufferState
from rlbench.types import Metrics, Transition

S = TypeVar("S")


@dataclass(frozen=True)
class Learner(Generic[S]):
    """Pure functions of one algorithm bound to its config and networks.

    init_fn(key) -> state
    update_fn(state, buffer_state, new_transitions, progress_remaining) -> (state, buffer_state, metrics):
        one training iteration: insert what was collected, sample, run all gradient steps fused.
    gradient_steps_fn(state, batches [n, B, ...], keys [n], progress_remaining) -> (state, metrics):
        the fused steps alone on given batches (what update_fn runs after sampling).
    act_fn(state, obs, key) -> (action in [-1, 1], next key): stochastic, for collection.
    act_deterministic_fn(state, obs) -> action: for evaluation.
    """

    init_fn: Callable[[jax.Array], S]
    update_fn: Callable[[S, BufferState, Transition, jax.Array], tuple[S, BufferState, Metrics]]
    gradient_steps_fn: Callable[[S, Transition, jax.Array, jax.Array], tuple[S, Metrics]]
    act_fn: Callable[[S, jax.Array, jax.Array], tuple[jax.Array, jax.Array]]
    act_deterministic_fn: Callable[[S, jax.Array], jax.Array]
    metric_names: tuple[str, ...]
