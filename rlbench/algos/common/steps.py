"""Optimisation plumbing shared by every learner: one gradient update, Polyak averaging, fusing."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import jax
import optax
from flax.training.train_state import TrainState

from rlbench.algos.common.schedules import Schedule

S = TypeVar("S", bound=TrainState)


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


def apply_loss(state: S, loss_fn: Callable[[Any], tuple[jax.Array, Any]]) -> tuple[S, jax.Array, Any]:
    """Differentiate `loss_fn(params) -> (loss, aux)` and take one optimizer step on `state`."""
    (loss, aux), grads = jax.value_and_grad(loss_fn, has_aux=True)(state.params)
    return state.apply_gradients(grads=grads), loss, aux


def polyak(target_params: Any, online_params: Any, tau: float) -> Any:
    """target <- tau * online + (1 - tau) * target."""
    return optax.incremental_update(online_params, target_params, tau)


def fuse_steps(batch: Any, n_steps: int) -> Any:
    """[n_steps * B, ...] -> [n_steps, B, ...], the leading axis that `lax.scan` runs over."""
    return jax.tree.map(lambda x: x.reshape(n_steps, x.shape[0] // n_steps, *x.shape[1:]), batch)
