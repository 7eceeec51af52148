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
  With `n_steps` (an int32 scalar, shared by all seeds as `first_step` is) only the first n_steps of the
  scan's steps run, the others are skipped under a `lax.cond`: a number of gradient steps that changes
  from call to call runs in calls of one compiled length.
- `train(state, buffer_state, progress_remaining, first_step, normalization, n_steps=None)`: sample
  steps_per_update(cfg) * batch_size rows with the state's key, scale them with the observation and
  reward statistics (`normalize`; None: as stored), and run `gradient_steps` on them.
- `update(state, buffer_state, new, progress_remaining, first_step, normalization)`: insert the new
  transitions, then `train`.
Metrics are averaged over the iteration's steps (NaN-skipping for steps without an actor update).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol, Self, TypeVar

import jax
import jax.numpy as jnp

from rlbench.algos.common.config import ActorCriticConfig, ReplayConfig
from rlbench.algos.common.steps import fuse_steps, set_learning_rate
from rlbench.algos.common.train_state import NetworkState
from rlbench.buffers.normalization import Normalization, normalize_batch
from rlbench.buffers.uniform import BufferState, UniformBuffer
from rlbench.types import Metrics, Transition


class ReplayLearnerState(Protocol):
    """What sampling and the scan of gradient steps read of an off-policy learner state (DQNState too)."""

    @property
    def key(self) -> jax.Array: ...

    @property
    def step(self) -> jax.Array: ...

    def replace(self, **overrides: object) -> Self: ...


class ActorCriticState(ReplayLearnerState, Protocol):
    """What the actor-critic iteration reads of a learner state (SACState, CrossQState, TD3State)."""

    @property
    def actor(self) -> NetworkState: ...

    @property
    def critic(self) -> NetworkState: ...


State = TypeVar("State")
S = TypeVar("S", bound=ActorCriticState)
R = TypeVar("R", bound=ReplayLearnerState)

# One half of a gradient step: (state, batch [B, ...], key) -> (state, metrics).
StepFn = Callable[[State, Transition, jax.Array], tuple[State, Metrics]]
# A gradient step's counter (gradient steps before it, shared by all seeds), batch and key.
StepInputs = tuple[jax.Array, Transition, jax.Array]


class GradientStepsFn(Protocol[State]):
    """n gradient steps fused in one `lax.scan` (module docstring)."""

    def __call__(
        self,
        state: State,
        batches: Transition,
        keys: jax.Array,
        progress_remaining: jax.Array,
        first_step: jax.Array,
        n_steps: jax.Array | None = None,
    ) -> tuple[State, Metrics]: ...


class TrainFn(Protocol[State]):
    """The gradient steps of one iteration on batches sampled from the replay buffer (module docstring)."""

    def __call__(
        self,
        state: State,
        buffer_state: BufferState,
        progress_remaining: jax.Array,
        first_step: jax.Array,
        normalization: Normalization | None = None,
        n_steps: jax.Array | None = None,
    ) -> tuple[State, Metrics]: ...


class ReplayUpdateFn(Protocol[State]):
    """Insert the new transitions, then train (module docstring)."""

    def __call__(
        self,
        state: State,
        buffer_state: BufferState,
        new: Transition,
        progress_remaining: jax.Array,
        first_step: jax.Array,
        normalization: Normalization | None = None,
    ) -> tuple[State, BufferState, Metrics]: ...


# The scan length of one update when the number of gradient steps varies (train_freq in episodes with
# gradient_steps -1, one env step each): the loop runs as many calls as it needs, the last one partly skipped.
VARIABLE_STEPS_PER_UPDATE = 64
# What every update reports beside its steps' losses: the learning rates (SB3's key, then SBX's per
# optimizer) and the gradient steps so far.
SCHEDULE_METRICS = (
    "train/learning_rate",
    "train/learning_rate_actor",
    "train/learning_rate_critic",
    "train/n_updates",
)


def steps_per_update(cfg: ReplayConfig) -> int:
    """The gradient steps one compiled update scans over: gradient_steps, or VARIABLE_STEPS_PER_UPDATE when
    their number varies (gradient_steps -1)."""
    return cfg.gradient_steps if cfg.gradient_steps > 0 else VARIABLE_STEPS_PER_UPDATE


def make_gradient_steps(
    cfg: ActorCriticConfig, critic_step: StepFn[S], actor_step: StepFn[S], actor_metric_names: Sequence[str]
) -> GradientStepsFn[S]:
    def skip_actor_step(state: S, batch: Transition, key: jax.Array) -> tuple[S, Metrics]:
        # Same pytree as the real branch; NaN metrics are dropped by the nanmean over the scan.
        return state, {name: jnp.full((), jnp.nan) for name in actor_metric_names}

    def gradient_step(state: S, step_batch_and_key: StepInputs) -> tuple[S, Metrics]:
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
        state: S,
        batches: Transition,
        keys: jax.Array,
        progress_remaining: jax.Array,
        first_step: jax.Array,
        n_steps: jax.Array | None = None,
    ) -> tuple[S, Metrics]:
        actor_lr = cfg.learning_rate(progress_remaining)
        critic_lr = actor_lr if cfg.qf_learning_rate is None else jnp.asarray(cfg.qf_learning_rate)
        state = state.replace(
            actor=set_learning_rate(state.actor, actor_lr),
            critic=set_learning_rate(state.critic, critic_lr),
        )
        state, metrics = scan_gradient_steps(gradient_step, state, batches, keys, first_step, n_steps)
        # SB3 logs the schedule's value as train/learning_rate; SBX logs each optimizer's, as below.
        metrics["train/learning_rate"] = metrics["train/learning_rate_actor"] = actor_lr
        metrics["train/learning_rate_critic"] = critic_lr
        metrics["train/n_updates"] = state.step
        return state, metrics

    return gradient_steps


def scan_gradient_steps(
    gradient_step: Callable[[R, StepInputs], tuple[R, Metrics]],
    state: R,
    batches: Transition,
    keys: jax.Array,
    first_step: jax.Array,
    n_steps: jax.Array | None = None,
) -> tuple[R, Metrics]:
    """`gradient_step` over the batches in one `lax.scan` (only the first `n_steps` when given), its metrics
    averaged over the steps that ran (NaN-skipping)."""
    steps = first_step + jnp.arange(keys.shape[0], dtype=jnp.int32)
    step_fn = gradient_step if n_steps is None else _first_steps_only(gradient_step, first_step + n_steps)
    state, metrics = jax.lax.scan(step_fn, state, (steps, batches, keys))  # metrics [n_steps]
    return state, {name: jnp.nanmean(value) for name, value in metrics.items()}


def _first_steps_only(
    gradient_step: Callable[[R, StepInputs], tuple[R, Metrics]], end: jax.Array
) -> Callable[[R, StepInputs], tuple[R, Metrics]]:
    """gradient_step on the steps before `end`; the others leave the state as it is, with NaN metrics."""

    def counted_step(state: R, step_batch_and_key: StepInputs) -> tuple[R, Metrics]:
        _, metric_shapes = jax.eval_shape(gradient_step, state, step_batch_and_key)

        def skip_step(state: R, step_batch_and_key: StepInputs) -> tuple[R, Metrics]:
            return state, jax.tree.map(lambda m: jnp.full(m.shape, jnp.nan, m.dtype), metric_shapes)

        stepped: tuple[R, Metrics] = jax.lax.cond(
            step_batch_and_key[0] < end, gradient_step, skip_step, state, step_batch_and_key
        )
        return stepped

    return counted_step


def make_train(cfg: ReplayConfig, buffer: UniformBuffer, gradient_steps: GradientStepsFn[R]) -> TrainFn[R]:
    n = steps_per_update(cfg)

    def train(
        state: R,
        buffer_state: BufferState,
        progress_remaining: jax.Array,
        first_step: jax.Array,
        normalization: Normalization | None = None,
        n_steps: jax.Array | None = None,
    ) -> tuple[R, Metrics]:
        key, sample_key, steps_key = jax.random.split(state.key, 3)
        # The buffer holds original transitions (as SB3 with VecNormalize): scaled here, by the current statistics.
        batch = buffer.sample_fn(buffer_state, sample_key, n * cfg.batch_size)
        batch = normalize_batch(batch, normalization)
        batches = fuse_steps(batch, n)  # [n, batch_size, ...]
        keys = jax.random.split(steps_key, n)
        return gradient_steps(state.replace(key=key), batches, keys, progress_remaining, first_step, n_steps)

    return train


def make_update(cfg: ReplayConfig, buffer: UniformBuffer, gradient_steps: GradientStepsFn[R]) -> ReplayUpdateFn[R]:
    train = make_train(cfg, buffer, gradient_steps)

    def update(
        state: R,
        buffer_state: BufferState,
        new: Transition,
        progress_remaining: jax.Array,
        first_step: jax.Array,
        normalization: Normalization | None = None,
    ) -> tuple[R, BufferState, Metrics]:
        buffer_state = buffer.add_fn(buffer_state, new)
        state, metrics = train(state, buffer_state, progress_remaining, first_step, normalization)
        return state, buffer_state, metrics

    return update
