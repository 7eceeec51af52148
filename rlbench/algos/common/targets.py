"""Polyak-averaged target networks (SAC, DroQ, TQC, TD3, DDPG): their update."""

from __future__ import annotations

from typing import Protocol

import jax
import jax.numpy as jnp

from rlbench.algos.common.steps import polyak
from rlbench.types import Params


class TargetUpdate(Protocol):
    """The settings of Polyak-averaged target critics (rlbench.algos.soft.config.TargetCriticConfig: SAC, TQC)."""

    @property
    def tau(self) -> float: ...

    @property
    def target_update_interval(self) -> int: ...


def updated_target(cfg: TargetUpdate, step: jax.Array, target_params: Params, params: Params) -> Params:
    """The target critics after gradient step `step` (counted from 0): Polyak-averaged towards `params` on
    steps 0, target_update_interval, 2 * target_update_interval, ..., unchanged on the others.

    `step` is the learner state's own counter. Under the seed axis's vmap it is batched, so the choice is a
    `where` on the averaged parameters rather than a `lax.cond` (which would become a select of both
    branches anyway): the average is one cheap elementwise pass. SB3 counts from 0 in each training call
    instead, so that with one gradient step per call its setting has no effect; here it counts every step.
    """
    averaged = polyak(target_params, params, cfg.tau)
    if cfg.target_update_interval == 1:  # static: every step, no select
        return averaged
    due = step % cfg.target_update_interval == 0
    chosen: Params = jax.tree.map(lambda new, old: jnp.where(due, new, old), averaged, target_params)
    return chosen
