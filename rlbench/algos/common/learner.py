"""The interface every algorithm module returns: pure functions that the runner jits once each.

A learner needs no replay buffer: `fused.make_update` joins its gradient steps to a buffer for
training, and its acting (rlbench.algos.common.acting) reads only the actor and the exploration state.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import jax

from rlbench.algos.common.acting import Acting
from rlbench.algos.common.footprint import update_activation_bytes
from rlbench.algos.common.fused import SCHEDULE_METRICS, StepFn, make_gradient_steps
from rlbench.types import EnvSpec, Metrics, Transition

S = TypeVar("S")


@dataclass(frozen=True)
class Learner(Generic[S]):
    """Pure functions of one algorithm bound to its config and networks.

    init_fn(key) -> state
    gradient_steps_fn(state, batches [n, B, ...], keys [n], progress_remaining, first_step) -> (state, metrics):
        n gradient steps fused in one `lax.scan`. `first_step` (int32 scalar) is the number of gradient
        steps done before the call, `state.step` of a single run; it decides which steps update the
        actor (policy_delay). It is shared by all seeds of a vmapped update (they advance in lockstep),
        so the actor branch stays a branch under `jax.vmap` (see fused.py and seed_axis.py). An optional
        `n_steps` (int32 scalar) runs only the first n_steps of the n (train_freq in episodes).
    critic_step_fn, actor_step_fn (state, batch [B, ...], key) -> (state, metrics): one gradient step's
        two halves, unfused; the speed benchmark reads their cost (FLOPs) from XLA separately, because
        the actor half runs only every `policy_delay` steps.
    acting: how the state acts (explore, evaluate, warm-up, exploration state).
    parameters(state): the networks' parameters (the check that a tuning trial ended finite).
    activation_bytes: an upper estimate of one training iteration's temporaries (the memory check).

    Every learner state has the fields `step` (int32 gradient steps done), `key` and `exploration`.
    """

    init_fn: Callable[[jax.Array], S]
    gradient_steps_fn: Callable[[S, Transition, jax.Array, jax.Array, jax.Array], tuple[S, Metrics]]
    metric_names: tuple[str, ...]
    critic_step_fn: StepFn
    actor_step_fn: StepFn
    acting: Acting
    parameters: Callable[[S], Any]
    activation_bytes: int


def actor_and_critic_params(state: Any) -> Any:
    return state.actor.params, state.critic.params


def assemble_learner(
    cfg: Any,
    spec: EnvSpec,
    acting: Acting,
    init_fn: Callable[[jax.Array], S],
    critic_step: StepFn,
    actor_step: StepFn,
    critic_metric_names: Sequence[str],
    actor_metric_names: Sequence[str],
) -> Learner[S]:
    """A Learner from an algorithm's two steps: the fusion and the metric bookkeeping are shared."""
    if getattr(cfg, "gsde", None) is not None:
        actor_step, actor_metric_names = with_exploration_std(actor_step), (*actor_metric_names, "train/std")
    return Learner(
        init_fn=init_fn,
        gradient_steps_fn=make_gradient_steps(cfg, critic_step, actor_step, actor_metric_names),
        metric_names=(*critic_metric_names, *actor_metric_names, *SCHEDULE_METRICS),
        critic_step_fn=critic_step,
        actor_step_fn=actor_step,
        acting=acting,
        parameters=actor_and_critic_params,
        activation_bytes=update_activation_bytes(cfg, spec),
    )


def with_exploration_std(actor_step: StepFn) -> StepFn:
    """`actor_step` that also reports train/std, SB3's mean of gSDE's exploration std after the step."""

    def step(state, batch: Transition, key: jax.Array):
        state, metrics = actor_step(state, batch, key)
        std = state.actor.apply_fn(state.actor.variables(), method="exploration_std")
        return state, {**metrics, "train/std": std.mean()}

    return step
