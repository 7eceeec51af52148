"""The interface every algorithm module returns: pure functions that the runner jits once each."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import flax.linen as nn
import jax

from rlbench.algos.common.fused import StepFn, make_gradient_steps, make_update
from rlbench.buffers.uniform import BufferState, UniformBuffer
from rlbench.networks.actor import deterministic_action, sample_action
from rlbench.types import Metrics, Transition

S = TypeVar("S")


@dataclass(frozen=True)
class Learner(Generic[S]):
    """Pure functions of one algorithm bound to its config and networks.

    init_fn(key) -> state
    update_fn(state, buffer_state, new_transitions, progress_remaining, first_step)
        -> (state, buffer_state, metrics): one training iteration: insert what was collected, sample,
        run all gradient steps fused.
    gradient_steps_fn(state, batches [n, B, ...], keys [n], progress_remaining, first_step) -> (state, metrics):
        the fused steps alone on given batches (what update_fn runs after sampling).
    `first_step` (int32 scalar) is the number of gradient steps done before the call, `state.step` of a
    single run; it decides which steps update the actor (policy_delay). It is shared by all seeds of a
    vmapped update (they advance in lockstep), so the actor branch stays a branch under `jax.vmap`
    (see fused.py and seed_axis.py).
    act_fn(state, obs, key) -> (action in [-1, 1], next key): stochastic, for collection.
    act_deterministic_fn(state, obs) -> action: for evaluation.
    critic_step_fn, actor_step_fn (state, batch [B, ...], key) -> (state, metrics): one gradient step's
        two halves, unfused; the speed benchmark reads their cost (FLOPs) from XLA separately, because
        the actor half runs only every `policy_delay` steps.
    """

    init_fn: Callable[[jax.Array], S]
    update_fn: Callable[[S, BufferState, Transition, jax.Array, jax.Array], tuple[S, BufferState, Metrics]]
    gradient_steps_fn: Callable[[S, Transition, jax.Array, jax.Array, jax.Array], tuple[S, Metrics]]
    act_fn: Callable[[S, jax.Array, jax.Array], tuple[jax.Array, jax.Array]]
    act_deterministic_fn: Callable[[S, jax.Array], jax.Array]
    metric_names: tuple[str, ...]
    critic_step_fn: StepFn
    actor_step_fn: StepFn


def assemble_learner(
    cfg: Any,
    buffer: UniformBuffer,
    actor: nn.Module,
    actor_variables: Callable[[S], dict[str, Any]],
    init_fn: Callable[[jax.Array], S],
    critic_step: StepFn,
    actor_step: StepFn,
    critic_metric_names: Sequence[str],
    actor_metric_names: Sequence[str],
) -> Learner[S]:
    """A Learner from an algorithm's two steps: the fused update, acting and evaluation are shared.

    `actor_variables(state)` gives the actor's Flax variables (CrossQ adds its BatchRenorm statistics);
    the actor is applied in evaluation mode to act.
    """
    gradient_steps = make_gradient_steps(cfg, critic_step, actor_step, actor_metric_names)

    def act(state: S, obs: jax.Array, key: jax.Array) -> tuple[jax.Array, jax.Array]:
        key, action_key = jax.random.split(key)
        mean, log_std = actor.apply(actor_variables(state), obs)
        return sample_action(mean, log_std, action_key)[0], key

    def act_deterministic(state: S, obs: jax.Array) -> jax.Array:
        return deterministic_action(actor.apply(actor_variables(state), obs)[0])

    return Learner(
        init_fn=init_fn,
        update_fn=make_update(cfg, buffer, gradient_steps),
        gradient_steps_fn=gradient_steps,
        act_fn=act,
        act_deterministic_fn=act_deterministic,
        metric_names=(*critic_metric_names, *actor_metric_names, "train/learning_rate", "train/n_updates"),
        critic_step_fn=critic_step,
        actor_step_fn=actor_step,
    )
