"""The seed axis: K independent learners as one pytree with a leading [K] axis, updated by one `jax.vmap`.

Every array of a K-seed learner state, buffer state, transition batch or key has a leading axis of
size K; seed i is the slice [i]. `SeedAxis.map` lifts a function of one seed's pytrees to the stacked
ones, with the arguments shared by all seeds (progress_remaining, first_step) left unbatched.

One seed has no axis at all on the device: `map` returns the function itself and `stack`, `take` and
`first` leave the tree as it is, so a one-seed run compiles and computes exactly what a run without
seeds computes, bit for bit. (Squeezing a [1] axis inside the jitted function is not enough: XLA then
fuses CrossQ's update differently, and its parameters drift by rounding within a few steps.) The host
keeps a seed axis on its numpy arrays in every case; `device` and `host` convert at the boundary.

The runner's update reads, for example:

    axis = SeedAxis(n_seeds)

    def update(states, buffer_states, new, progress_remaining, obs, act_keys):
        first_step = axis.first(states.step)  # seeds advance in lockstep: seed 0's counter is everyone's
        one_seed = lambda state, buffer_state, new, obs, key: ...learner.update_fn(..., first_step)...
        return axis.map(one_seed)(states, buffer_states, new, obs, act_keys)

The shared `first_step` keeps the policy-delay predicate unbatched, so the actor step stays a
`lax.cond` branch under vmap instead of a select that computes it on every gradient step (fused.py).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import jax
import jax.numpy as jnp
import numpy as np
import numpy.typing as npt

from rlbench.types import PyTree

T = TypeVar("T")
R = TypeVar("R")


def _stack_every_leaf(trees: list[PyTree]) -> PyTree:
    return jax.tree.map(lambda *xs: jnp.stack(xs), *trees)


def _slice_every_leaf(tree: PyTree, i: int) -> PyTree:
    return jax.tree.map(lambda x: x[i], tree)


@dataclass(frozen=True)
class SeedAxis:
    """A leading axis of `n_seeds` independent learners on every array of their pytrees (none for one seed)."""

    n_seeds: int
    # How `stack` and `take` go over the leaves: op by op here; the training loop passes one compiled program
    # for each (rlbench.loop.compiled.seed_axis), which is much faster for a state of many leaves.
    stack_leaves: Callable[[list[PyTree]], PyTree] = field(default=_stack_every_leaf, compare=False, repr=False)
    slice_leaves: Callable[[PyTree, int], PyTree] = field(default=_slice_every_leaf, compare=False, repr=False)

    def __post_init__(self) -> None:
        if self.n_seeds < 1:
            raise ValueError(f"n_seeds must be at least 1, got {self.n_seeds}")

    @property
    def batched(self) -> bool:
        """Whether device values carry the seed axis (more than one seed)."""
        return self.n_seeds > 1

    def map(self, fn: Callable[..., R], shared_argnums: Sequence[int] = ()) -> Callable[..., R]:
        """`fn` over one seed's pytrees -> the same over the seeds' stacked pytrees.

        Positional arguments in `shared_argnums` are the same for all seeds and have no seed axis;
        every output gains one. With one seed this is `fn` itself."""
        if not self.batched:
            return fn
        shared = frozenset(shared_argnums)

        def all_seeds(*args: PyTree) -> R:
            in_axes = tuple(None if i in shared else 0 for i in range(len(args)))
            return jax.vmap(fn, in_axes=in_axes)(*args)

        return all_seeds

    def first(self, tree: T) -> T:
        """Seed 0's slice: for the counters every seed shares, such as `state.step` (also inside jit)."""
        return jax.tree.map(lambda x: x[0], tree) if self.batched else tree

    def take(self, tree: T, i: int) -> T:
        """Seed i's slice of every array: its state for a checkpoint, its policy for evaluation."""
        return self.slice_leaves(tree, i) if self.batched else tree

    def stack(self, trees: Sequence[T]) -> T:
        """One pytree with a leading [K] axis from K per-seed pytrees of the same structure."""
        if len(trees) != self.n_seeds:
            raise ValueError(f"expected {self.n_seeds} per-seed trees, got {len(trees)}")
        return self.stack_leaves(list(trees)) if self.batched else trees[0]

    def broadcast(self, tree: T) -> T:
        """K copies of `tree` along the seed axis (inside jit: one allocation, e.g. K empty replay buffers)."""
        if not self.batched:
            return tree
        broadcast: T = jax.tree.map(lambda x: jnp.broadcast_to(x, (self.n_seeds, *x.shape)), tree)
        return broadcast

    def init(self, init_fn: Callable[[jax.Array], T], keys: Sequence[jax.Array]) -> T:
        """The K initial states: `init_fn(keys[i])` for each seed, stacked.

        Called once per seed rather than vmapped, so that seed i starts with exactly the parameters of
        a single run with that key (pass the same `init_fn`, jitted or not, as the single run calls):
        a vmapped init is another compiled program, whose batched operations nothing guarantees to
        round as the unbatched ones do. It costs K calls of one compiled function, once per run.
        """
        return self.stack([init_fn(key) for key in keys])

    def device(self, tree: T) -> T:
        """Host values with a seed axis (numpy: [K, ...]) as the device functions take them."""
        return tree if self.batched else jax.tree.map(lambda x: x[0], tree)

    def host(self, x: npt.ArrayLike) -> npt.NDArray[Any]:
        """A device result as a numpy array with the seed axis, whatever the number of seeds."""
        return np.asarray(x) if self.batched else np.asarray(x)[None]
