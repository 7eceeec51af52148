"""A learner's size and cost per gradient step, from abstract shapes: train.py prints them at start (a
SimBa learner at net_arch [256, 256] is about 15 times the MLP's work, and a run should say so before it
trains), and `bench speed` reads its FLOP per gradient step here.

The FLOP are XLA's cost analysis of one gradient step. At start it analyses the lowered program (traced,
not compiled: a few tenths of a second); the benchmark analyses the compiled one, which it pays for anyway.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

from rlbench.types import EnvSpec, Transition

SI_PREFIXES = (("G", 1e9), ("M", 1e6), ("k", 1e3))


def parameter_count(tree: Any) -> int:
    return sum(leaf.size for leaf in jax.tree_util.tree_leaves(tree))


def parameter_counts(learner: Any) -> tuple[int, int]:
    """(actor, critics) trained parameters: every critic of the ensemble, no target network or statistic."""
    shapes = jax.eval_shape(lambda key: learner.parameters(learner.init_fn(key)), jax.random.key(0))
    return tuple(parameter_count(part) for part in shapes)


def batch_shapes(spec: EnvSpec, batch_size: int) -> Transition:
    """One batch of transitions as shapes only (float32 everywhere, as the replay buffer samples)."""

    def rows(*shape: int) -> jax.ShapeDtypeStruct:
        return jax.ShapeDtypeStruct((batch_size, *shape), jnp.float32)

    return Transition(
        obs=rows(spec.obs_dim),
        action=rows(spec.action_dim),
        reward=rows(),
        next_obs=rows(spec.obs_dim),
        terminated=rows(),
    )


def gradient_step_gflop(learner: Any, cfg: Any, spec: EnvSpec, compiled: bool = False) -> float:
    """GFLOP of one gradient step as the loop runs it on average: the critic half every step, the actor
    and temperature half every `policy_delay` steps, by XLA's cost analysis of one batch's program,
    lowered (no compilation) or `compiled` (what XLA runs: fusions change the count by a few percent)."""
    key = jax.eval_shape(lambda: jax.random.key(0))
    state = jax.eval_shape(learner.init_fn, key)
    batch = batch_shapes(spec, cfg.batch_size)

    def flops(step) -> float:
        lowered = jax.jit(step).lower(state, batch, key)
        return (lowered.compile() if compiled else lowered).cost_analysis()["flops"]

    return (flops(learner.critic_step_fn) + flops(learner.actor_step_fn) / cfg.policy_delay) / 1e9


def learner_summary(algo: Any, cfg: Any, spec: EnvSpec) -> str:
    """One line: the learner's parameters and the work of one gradient step, so that a costly network
    shows before it trains."""
    learner = algo.make_learner(cfg, spec)
    if learner.critic_step_fn is None:  # on-policy: one network pair and one optimizer
        shapes = jax.eval_shape(lambda key: learner.parameters(learner.init_fn(key)), jax.random.key(0))
        return f"Learner: {si(parameter_count(shapes))} parameters (policy and value networks)"
    actor, critics = parameter_counts(learner)
    flop = gradient_step_gflop(learner, cfg, spec) * 1e9
    return (
        f"Learner: {si(actor + critics)} parameters (actor {si(actor)}, critics {si(critics)}); about "
        f"{si(flop, 'FLOP')} per gradient step at batch {cfg.batch_size}"
    )


def si(value: float, unit: str = "") -> str:
    """`value` to three significant digits with an SI prefix: si(98) 98, si(67330) 67.3k, si(8.7e9, "FLOP")
    8.7 GFLOP."""
    rounded = float(f"{value:.3g}")  # first, so that 999,600 is 1M, not 1e+03k
    prefix, scale = next(((name, size) for name, size in SI_PREFIXES if rounded >= size), ("", 1.0))
    number = f"{rounded / scale:.3g}"
    return f"{number} {prefix}{unit}" if unit else f"{number}{prefix}"
