"""A learner's size and cost per gradient step, from abstract shapes: train.py prints them at start (a
SimBa learner at net_arch [256, 256] is about 15 times the MLP's work, and a run should say so before it
trains), and `bench speed` reads its FLOP per gradient step here.

The FLOP are XLA's cost analysis of one gradient step. At start it analyses the lowered program (traced,
not compiled: a few tenths of a second); the benchmark analyses the compiled one, which it pays for anyway.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple, Protocol, cast

import jax
import jax.numpy as jnp

from rlbench.algos.common.config import ActorCriticConfig, LearnerConfig, ReplayConfig
from rlbench.algos.common.learner import Learner
from rlbench.config.algorithm import Algorithm
from rlbench.types import EnvSpec, PyTree, Transition

SI_PREFIXES = (("G", 1e9), ("M", 1e6), ("k", 1e3))


class GradientSteps(Protocol):
    """What the cost of a gradient step reads of an off-policy config (ActorCriticConfig)."""

    @property
    def batch_size(self) -> int: ...

    @property
    def policy_delay(self) -> int: ...


class ValueSteps(NamedTuple):
    """A value-based learner's gradient steps (DQN): one step kind, every step."""

    batch_size: int
    policy_delay: int = 1


def parameter_count(tree: PyTree) -> int:
    return sum(leaf.size for leaf in jax.tree_util.tree_leaves(tree))


def parameter_counts(learner: Learner[Any]) -> tuple[int, int]:
    """(actor, critics) trained parameters: every critic of the ensemble, no target network or statistic."""
    shapes = jax.eval_shape(lambda key: learner.parameters(learner.init_fn(key)), jax.random.key(0))
    actor, critics = (parameter_count(part) for part in shapes)
    return actor, critics


def batch_shapes(spec: EnvSpec, batch_size: int) -> Transition:
    """One batch of transitions as shapes only (as the replay buffer samples: images uint8, the rest float32)."""

    def rows(*shape: int, dtype: type = jnp.float32) -> jax.Array:
        # The array's shape and dtype alone, which lowering reads: an abstract value in the array's place, as
        # jax.eval_shape returns them.
        return cast(jax.Array, jax.ShapeDtypeStruct((batch_size, *shape), dtype))

    return Transition(
        obs=rows(spec.obs_dim, dtype=spec.obs_dtype),
        action=rows(spec.action_dim),
        reward=rows(),
        next_obs=rows(spec.obs_dim, dtype=spec.obs_dtype),
        terminated=rows(),
    )


def gradient_step_gflop(learner: Learner[Any], cfg: GradientSteps, spec: EnvSpec, compiled: bool = False) -> float:
    """GFLOP of one gradient step as the loop runs it on average: the critic half every step, the actor
    and temperature half every `policy_delay` steps, by XLA's cost analysis of one batch's program,
    lowered (no compilation) or `compiled` (what XLA runs: fusions change the count by a few percent)."""
    key = jax.eval_shape(lambda: jax.random.key(0))
    state = jax.eval_shape(learner.init_fn, key)
    batch = batch_shapes(spec, cfg.batch_size)

    def flops(step: Callable[..., Any] | None) -> float:
        if step is None:  # a value-based learner (DQN) has no actor step
            return 0.0
        lowered = jax.jit(step).lower(state, batch, key)
        analysis = (lowered.compile() if compiled else lowered).cost_analysis()
        assert analysis is not None, "XLA's cost analysis of the step"
        return analysis["flops"]

    return (flops(learner.critic_step_fn) + flops(learner.actor_step_fn) / cfg.policy_delay) / 1e9


def learner_summary(algo: Algorithm, cfg: LearnerConfig, spec: EnvSpec) -> str:
    """One line: the learner's parameters and the work of one gradient step, so that a costly network
    shows before it trains."""
    learner = algo.make_learner(cfg, spec)
    if learner.critic_step_fn is None:  # on-policy: one network pair and one optimizer
        shapes = jax.eval_shape(lambda key: learner.parameters(learner.init_fn(key)), jax.random.key(0))
        return f"Learner: {si(parameter_count(shapes))} parameters (policy and value networks)"
    if learner.actor_step_fn is None:  # value-based: one Q-network
        assert isinstance(cfg, ReplayConfig), "a learner with a Q-network step is an off-policy one"
        shapes = jax.eval_shape(lambda key: learner.parameters(learner.init_fn(key)), jax.random.key(0))
        flop = gradient_step_gflop(learner, ValueSteps(cfg.batch_size), spec) * 1e9
        return (
            f"Learner: {si(parameter_count(shapes))} parameters (Q-network); about {si(flop, 'FLOP')} per "
            f"gradient step at batch {cfg.batch_size}"
        )
    assert isinstance(cfg, ActorCriticConfig), "a learner with a critic step is an off-policy one"
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
