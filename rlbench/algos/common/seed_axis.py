"""PROVISIONAL (lead's stand-in until the seed-axis branch merges)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np


@dataclass(frozen=True)
class SeedAxis:
    n_seeds: int

    @property
    def batched(self) -> bool:
        return self.n_seeds > 1

    def map(self, fn):
        return jax.vmap(fn) if self.batched else fn

    def first(self, x):
        return x[0] if self.batched else x

    def take(self, tree: Any, index: int) -> Any:
        return jax.tree.map(lambda x: x[index], tree) if self.batched else tree

    def stack(self, trees):
        return jax.tree.map(lambda *xs: jnp.stack(xs), *trees) if self.batched else trees[0]

    def broadcast(self, tree):
        return jax.tree.map(lambda x: jnp.broadcast_to(x, (self.n_seeds, *x.shape)), tree) if self.batched else tree

    def device(self, tree):
        return tree if self.batched else jax.tree.map(lambda x: x[0], tree)

    def host(self, x):
        return np.asarray(x) if self.batched else np.asarray(x)[None]
