"""The fused training iteration shared by every learner.

An algorithm supplies `critic_step` and `actor_step` (each `(state, batch, key) -> (state, metrics)`);
this module builds from them:
- `gradient_steps(state, batches [n, B, ...], keys [n], progress_remaining, first_step)`: sets the
  scheduled learning rates, then runs the n gradient steps in one `lax.scan`. Each step runs the
  critic step and, under `lax.cond` on the traced counter `first_step + i`, the actor step on
  gradient steps policy_delay, 2 * policy_delay, ... (SB3/SBX counting). The update therefore
  compiles once, whatever the policy-delay offset of an iteration (SBX compiles one variant per offset).
  `first_step` (int32 scalar: the gradient steps done before this call) is an argument rather than
  `state.step` because under `jax.vmap` over seeds `state.step` is batched, and a batched predicate
  turns the `cond` into a `select` that runs the actor step on every gradient step. All seeds advance
  in lockstep, so one unbatched counter serves them all and the `cond` stays a branch.
- `update(state, buffer_state, new, progress_remaining, first_step, normalization)`: insert the new
  transitions, sample gradient_steps * batch_size rows with the state's key, scale them with the
  observation and reward statistics (`normalize`; None: as stored), and run `gradient_steps`.
Metrics are averaged over the iteration's steps (NaN-skipping for steps without an actor update).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp

from rlbench.algos.common.steps import fuse_steps, set_learning_rate
from rlbench.buffers.normalization import Normalization, normalize_batch
from rlbench.buffers.uniform import BufferState, UniformBuffer
from rlbench.types import Metrics, Transition

StepFn = Callable[[Any, Transition, jax.Array], tuple[Any, Metrics]]


def make_gradient_steps(cfg: Any, critic_step: StepFn, actor_step: StepFn, actor_metric_names: Sequence[str]):
    def skip_actor_step(state, batch: Transition, key: jax.Array):
        # Same pytree as the real branch; NaN metrics are dropped by the nanmean over the scan.
        return state, {name: jnp.full((), jnp.nan) for name in actor_metric_names}

    def gradient_step(state, step_batch_and_key):
        step, batch, key = step_batch_and_key  # step: gradient steps done before this one, shared by all seeds
        critic_key, actor_key = jax.random.split(key)
        state, critic_metrics = critic_step(state, batch, critic_key)
        if cfg.policy_delay == 1:  # static: no branch at all
            state, actor_metrics = actor_step(state, batch, actor_key)
        else:
            do_actor = (step + 1) % cfg.policy_delay == 0
            state, actor_metrics = jax.lax.cond(do_actor, actor_step, skip_actor_step, state, batch, actor_key)
        return state.replace(step=state.step + 1), critic_metrics | actor_metrics

    def gradient_steps(
        state, batches: Transition, keys: jax.Array, progress_remaining: jax.Array, first_step: jax.Array
    ):
        actor_lr = cfg.learning_rate(progress_remaining)
        critic_lr = actor_lr if cfg.qf_learning_rate is None else jnp.asarray(cfg.qf_learning_rate)
        state = state.replace(
            actor=set_learning_rate(state.actor, actor_lr),
            critic=set_learning_rate(state.critic, critic_lr),
        )
        steps = first_step + jnp.arange(keys.shape[0], dtype=jnp.int32)
        state, metrics = jax.lax.scan(gradient_step, state, (steps, batches, keys))  # metrics [n_steps]
        metrics = {name: jnp.nanmean(value) for name, value in metrics.items()}
        metrics["train/learning_rate"] = actor_lr
        metrics["train/n_updates"] = state.step
        return state, metrics

    return gradient_steps


def make_update(cfg: Any, buffer: UniformBuffer, gradient_steps):
    def update(
        state,
        buffer_state: BufferState,
        new: Transition,
        progress_remaining: jax.Array,
        first_step: jax.Array,
        normalization: Normalization | None = None,
    ):
        buffer_state = buffer.add_fn(buffer_state, new)
        key, sample_key, steps_key = jax.random.split(state.key, 3)
        # The buffer holds original transitions (as SB3 with VecNormalize): scaled here, by the current statistics.
        batch = buffer.sample_fn(buffer_state, sample_key, cfg.gradient_steps * cfg.batch_size)
        batch = normalize_batch(batch, normalization)
        batches = fuse_steps(batch, cfg.gradient_steps)  # [gradient_steps, batch_size, ...]
        keys = jax.random.split(steps_key, cfg.gradient_steps)
        state, metrics = gradient_steps(state.replace(key=key), batches, keys, progress_remaining, first_step)
        return state, buffer_state, metrics

    return update
