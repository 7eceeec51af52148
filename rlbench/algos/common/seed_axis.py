"""The seed axis: K independent learners as one pytree with a leading [K] axis, updated by one `jax.vmap`.

Every array of a K-seed learner state, buffer state, transition batch or key has a leading axis of
size K; seed i is the slice [i]. `SeedAxis.map` lifts a function of one seed's pytrees to the stacked
ones, with the arguments shared by all seeds (progress_remaining, first_step) left unbatched. The
runner writes, for example:

    axis = SeedAxis(n_seeds)
    step = axis.map(update_then_act, shared_argnums=(3, 4))  # progress_remaining, first_step

    def update(states, buffer_states, new, progress_remaining, obs, act_keys):
        first_step = axis.first(states.step)  # seeds advance in lockstep: seed 0's counter is everyone's
        return step(states, buffer_states, new, progress_remaining, first_step, obs, act_keys)

    update = jax.jit(update, donate_argnums=(0, 1))

The shared `first_step` keeps the policy-delay predicate unbatched, so the actor step stays a
`lax.cond` branch under vmap instead of a select that computes it on every gradient step (fused.py).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import jax
import jax.numpy as jnp

T = TypeVar("T")


@dataclass(frozen=True)
class SeedAxis:
    """A leading axis of `n_seeds` independent learners on every array of their pytrees."""

    n_seeds: int

    def __post_init__(self) -> None:
        if self.n_seeds < 1:
            raise ValueError(f"n_seeds must be at least 1, got {self.n_seeds}")

    def map(self, fn: Callable[..., Any], shared_argnums: Sequence[int] = ()) -> Callable[..., Any]:
        """`fn` over one seed's pytrees -> the same over pytrees with a leading [K] axis on every array.

        Positional arguments in `shared_argnums` are the same for all seeds and have no seed axis;
        every output gains one. With one seed, `fn` runs unbatched on the squeezed arguments, so a
        one-seed run computes exactly (bit for bit) what a run without the seed axis computes; a
        vmap of size 1 may batch some operations differently and round differently.
        """
        shared = frozenset(shared_argnums)
        if self.n_seeds > 1:

            def all_seeds(*args):
                in_axes = tuple(None if i in shared else 0 for i in range(len(args)))
                return jax.vmap(fn, in_axes=in_axes)(*args)

            return all_seeds

        def one_seed(*args):
            args = [arg if i in shared else self.take(arg, 0) for i, arg in enumerate(args)]
            return jax.tree.map(lambda x: jnp.expand_dims(x, 0), fn(*args))

        return one_seed

    def first(self, tree: T) -> T:
        """Seed 0's slice: for the counters every seed shares, such as `state.step`."""
        return self.take(tree, 0)

    @staticmethod
    def take(tree: T, i: int) -> T:
        """Seed i's slice of every array: its state for a checkpoint, its observations for evaluation."""
        return jax.tree.map(lambda x: x[i], tree)

    def stack(self, trees: Sequence[T]) -> T:
        """One pytree with a leading [K] axis from K per-seed pytrees of the same structure."""
        if len(trees) != self.n_seeds:
            raise ValueError(f"expected {self.n_seeds} per-seed trees, got {len(trees)}")
        return jax.tree.map(lambda *xs: jnp.stack(xs), *trees)

    def init(self, init_fn: Callable[[jax.Array], T], keys: Sequence[jax.Array]) -> T:
        """The K initial states: `init_fn(keys[i])` for each seed, stacked.

        Called once per seed rather than vmapped, so that seed i starts with exactly the parameters of
        a single run with that key (pass the same `init_fn`, jitted or not, as the single run calls):
        a vmapped init is another compiled program, whose batched operations nothing guarantees to
        round as the unbatched ones do. It costs K calls of one compiled function, once per run.
        """
        return self.stack([init_fn(key) for key in keys])
