"""Polyak-averaged target networks (SAC, DroQ, TQC, TD3, DDPG): their settings and their update."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import jax
import jax.numpy as jnp

from rlbench.algos.common.spelling import number
from rlbench.algos.common.steps import polyak
from rlbench.types import Params


def read_target(params: Mapping[str, Any]) -> dict[str, Any]:
    """The target networks' settings an entry sets: the Polyak rate `tau`, and (SAC, TQC)
    `target_update_interval`, the gradient steps from one Polyak update to the next."""
    values: dict[str, Any] = {}
    if "tau" in params:
        values["tau"] = number(params, "tau", float, 0, 1, low_open=True)
    if "target_update_interval" in params:
        values["target_update_interval"] = number(params, "target_update_interval", int, 1)
    return values


def target_hyperparams(cfg: Any) -> dict[str, Any]:
    """The inverse of read_target, in file spelling, for a config with target critics (SACConfig, TQCConfig)."""
    return {"tau": cfg.tau, "target_update_interval": cfg.target_update_interval}


def updated_target(cfg: Any, step: jax.Array, target_params: Params, params: Params) -> Params:
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
    return jax.tree.map(lambda new, old: jnp.where(due, new, old), averaged, target_params)
