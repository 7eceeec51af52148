"""Divergence in a learner state: is every float finite, and which arrays are not? (The loop's checks built
on it: rlbench.loop.divergence_guard; what the loop does about a divergence: rlbench.loop.divergence.)

`all_finite` is a function of one learner state (a scalar bool); under `jax.vmap` over a leading
seed axis it gives one flag per seed, so a run of several seeds can stop only the seeds that diverged.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from rlbench.types import PyTree

# A leaf's path: its key entries, of whatever kinds the tree's nodes use (dict keys, attributes, indices).
Path = jax.tree_util.KeyPath[Any]


def _float_leaves(tree: PyTree) -> list[tuple[Path, jax.Array]]:
    return [
        (path, leaf)
        for path, leaf in jax.tree_util.tree_flatten_with_path(tree)[0]
        if jnp.issubdtype(leaf.dtype, jnp.inexact)
    ]  # PRNG keys and step counters cannot be NaN


def all_finite(tree: PyTree) -> jax.Array:
    """True when no float leaf of `tree` holds a NaN or an infinity."""
    return jnp.all(jnp.stack([jnp.isfinite(leaf).all() for _, leaf in _float_leaves(tree)]))


def non_finite_paths(tree: PyTree) -> list[str]:
    """The dotted paths of the leaves holding NaN or inf (host side: for the error message only)."""
    return [
        jax.tree_util.keystr(path, simple=True, separator=".")
        for path, leaf in _float_leaves(tree)
        if not np.isfinite(np.asarray(leaf)).all()
    ]
