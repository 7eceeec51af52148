"""Optimisation plumbing shared by every learner: one gradient update, Polyak averaging, fusing."""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol, Self, TypeVar

import jax
import optax
from flax.training.train_state import TrainState

from rlbench.algos.common.schedules import Schedule
from rlbench.types import Params

S = TypeVar("S", bound=TrainState)
T = TypeVar("T")
Aux = TypeVar("Aux")


class Trainable(Protocol):
    """What `apply_loss` reads of a train state: flax's TrainState and NetworkState (whose own
    `apply_gradients` is annotated; TrainState's is not, so a call through this protocol is typed)."""

    @property
    def params(self) -> Params: ...

    def apply_gradients(self, *, grads: Params) -> Self: ...


TS = TypeVar("TS", bound=Trainable)


def make_adam(
    learning_rate: Schedule | float, b1: float = 0.9, weight_decay: float | None = None
) -> optax.GradientTransformation:
    """Adam whose learning rate is a leaf of the optimizer state, so a schedule needs no recompile; with a
    `weight_decay` AdamW (SimbaPolicy's optimizer, as SBX's), even at 0, so its state keeps one structure."""
    initial = learning_rate if isinstance(learning_rate, float) else learning_rate.initial
    if weight_decay is None:
        return optax.inject_hyperparams(optax.adam)(learning_rate=initial, b1=b1)
    return optax.inject_hyperparams(optax.adamw)(learning_rate=initial, b1=b1, weight_decay=weight_decay)


def set_learning_rate(state: S, learning_rate: jax.Array) -> S:
    """The same train state with the learning rate in its optimizer state replaced."""
    opt_state = state.opt_state
    old = opt_state.hyperparams["learning_rate"]
    # Same dtype and a strong type as the leaf it replaces: a weakly typed schedule value would change
    # the state's type after the first update and make the next call compile the update again.
    learning_rate = jax.lax.convert_element_type(learning_rate, old.dtype)
    hyperparams = {**opt_state.hyperparams, "learning_rate": learning_rate}
    return state.replace(opt_state=opt_state._replace(hyperparams=hyperparams))


def apply_gradients(state: TS, grads: Params) -> TS:
    """`state.apply_gradients(grads=grads)`, through the annotated `Trainable` (flax's TrainState method is not)."""
    return state.apply_gradients(grads=grads)


def apply_loss(state: TS, loss_fn: Callable[[Params], tuple[jax.Array, Aux]]) -> tuple[TS, jax.Array, Aux]:
    """Differentiate `loss_fn(params) -> (loss, aux)` and take one optimizer step on `state`."""
    (loss, aux), grads = jax.value_and_grad(loss_fn, has_aux=True)(state.params)
    return state.apply_gradients(grads=grads), loss, aux


def polyak(target_params: Params, online_params: Params, tau: float) -> Params:
    """target <- tau * online + (1 - tau) * target."""
    averaged: Params = optax.incremental_update(online_params, target_params, tau)
    return averaged


def fuse_steps(batch: T, n_steps: int) -> T:
    """[n_steps * B, ...] -> [n_steps, B, ...], the leading axis that `lax.scan` runs over."""
    fused: T = jax.tree.map(lambda x: x.reshape(n_steps, x.shape[0] // n_steps, *x.shape[1:]), batch)
    return fused
