"""The interface every algorithm module returns: pure functions that the runner jits once each, for
off-policy learners (a replay buffer sampled with replacement) and on-policy ones (each rollout used once).

The loop stages the transitions of `Collection.vector_steps_per_update` vector steps on the host, then makes
one device call: `update(state, storage_state, new, progress_remaining, first_step, normalization)`. How the
learner reads its data is its own: an off-policy learner inserts `new` into its replay buffer and samples
its gradient steps' batches from it (rlbench.algos.common.fused); PPO takes `new` as its rollout, GAE and
epochs of minibatches (rlbench.algos.ppo.update), and keeps nothing between calls. `Storage` is what the
loop holds for it on the device between calls, and what a checkpoint saves of it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Generic, NamedTuple, Protocol, TypeVar, runtime_checkable

import jax

from rlbench.algos.common.acting import Acting
from rlbench.algos.common.config import ActorCriticConfig, ReplayConfig
from rlbench.algos.common.footprint import update_activation_bytes
from rlbench.algos.common.fused import (
    SCHEDULE_METRICS,
    ActorCriticState,
    GradientStepsFn,
    StepFn,
    TrainFn,
    make_gradient_steps,
    make_train,
    make_update,
)
from rlbench.buffers.normalization import Normalization
from rlbench.buffers.uniform import UniformBuffer, make_uniform_buffer
from rlbench.networks.actor import GSDEConfig
from rlbench.types import EnvSpec, Metrics, Params, PyTree, Transition

S = TypeVar("S")
AC = TypeVar("AC", bound=ActorCriticState)

# (state, storage state, new transitions [n, ...], progress_remaining, first_step, normalization)
#   -> (state, storage state, metrics). The storage state is the learner's (Storage): a replay buffer's
#   BufferState, or an empty tuple on-policy.
UpdateFn = Callable[[S, PyTree, Transition, jax.Array, jax.Array, Normalization | None], tuple[S, PyTree, Metrics]]


class Collection(NamedTuple):
    """How a learner's experience is collected and when it trains: the loop's schedule, the memory check and
    the checkpoint ask the learner, not its config's keys."""

    vector_steps_per_update: int  # train_freq (off-policy, in steps or episodes) or n_steps (a rollout)
    learning_starts: int  # env steps of warm-up before the first update (0 on-policy)
    per_episode: bool  # train_freq in episodes: train at the end of every train_freq-th episode (one env)
    # The staged transitions are a rollout: they keep `truncated` (GAE stops at every episode end), and with
    # `normalize` the observations and rewards as the policy saw them (scaled when collected, as SB3's
    # VecNormalize hands them to PPO), where a replay buffer keeps them as the envs returned them.
    stages_rollout: bool


@dataclass(frozen=True)
class Storage:
    """What waits on the device between updates, per seed: a replay buffer, or nothing (on-policy: the
    rollout arrives with the update that consumes it). `replay` is the buffer a checkpoint saves."""

    init_fn: Callable[[], PyTree]
    insert_fn: Callable[[PyTree, Transition], PyTree]  # new transitions without training (warm-up, per episode)
    replay: UniformBuffer | None

    @property
    def replay_capacity(self) -> int:
        return 0 if self.replay is None else self.replay.capacity


def replay_storage(buffer: UniformBuffer) -> Storage:
    return Storage(init_fn=buffer.init_fn, insert_fn=buffer.add_fn, replay=buffer)


def replay_collection(cfg: ReplayConfig) -> Collection:
    """An off-policy learner's schedule: train_freq vector steps (or episodes) after learning_starts env steps."""
    return Collection(
        vector_steps_per_update=cfg.train_freq,
        learning_starts=cfg.learning_starts,
        per_episode=cfg.train_freq_unit == "episode",
        stages_rollout=False,
    )


def no_storage() -> Storage:
    """An on-policy learner's: nothing is kept between updates, and nothing is inserted without one."""

    def insert(storage_state: PyTree, new: Transition) -> PyTree:
        raise TypeError("an on-policy learner trains on every rollout: transitions are never inserted alone")

    return Storage(init_fn=tuple, insert_fn=insert, replay=None)


@dataclass(frozen=True)
class Learner(Generic[S]):
    """Pure functions of one algorithm bound to its config and networks.

    init_fn(key) -> state
    update_fn: one training iteration on the new transitions (module docstring); `first_step` (int32
        scalar, shared by all seeds) is the gradient steps done before the call.
    storage, collection: what the loop keeps for the learner, and when it trains (above).
    acting: how the state acts (explore, evaluate, warm-up, exploration state).
    parameters(state): the networks' parameters (the check that a tuning trial ended finite).
    activation_bytes: an upper estimate of one training iteration's temporaries (the memory check).

    Off-policy learners also have, for `bench`, the tests and train_freq in episodes:
    train_fn(state, storage_state, progress_remaining, first_step, normalization, n_steps) -> (state, metrics):
        the gradient steps of one iteration sampled from the replay buffer, only the first `n_steps` run.
    gradient_steps_fn(state, batches [n, B, ...], keys [n], progress_remaining, first_step) -> (state, metrics):
        n gradient steps fused in one `lax.scan`. `first_step` (int32 scalar) is the number of gradient
        steps done before the call, `state.step` of a single run; it decides which steps update the
        actor (policy_delay). It is shared by all seeds of a vmapped update (they advance in lockstep),
        so the actor branch stays a branch under `jax.vmap` (see fused.py and seed_axis.py). An optional
        `n_steps` (int32 scalar) runs only the first n_steps of the n (train_freq in episodes).
    critic_step_fn, actor_step_fn (state, batch [B, ...], key) -> (state, metrics): one gradient step's
        two halves, unfused; the speed benchmark reads their cost (FLOPs) from XLA separately, because
        the actor half runs only every `policy_delay` steps.

    Every learner state has the fields `step` (int32 gradient steps done), `key` and `exploration`.
    """

    init_fn: Callable[[jax.Array], S]
    update_fn: UpdateFn[S]
    storage: Storage
    collection: Collection
    metric_names: tuple[str, ...]
    acting: Acting
    parameters: Callable[[S], PyTree]
    activation_bytes: int
    train_fn: TrainFn[S] | None = None
    gradient_steps_fn: GradientStepsFn[S] | None = None
    critic_step_fn: StepFn[S] | None = None
    actor_step_fn: StepFn[S] | None = None


@runtime_checkable
class ExploresWithGSDE(Protocol):
    """A config with gSDE's settings (the SAC family's SoftConfig), set or None."""

    @property
    def gsde(self) -> GSDEConfig | None: ...


def actor_and_critic_params(state: ActorCriticState) -> tuple[Params, Params]:
    return state.actor.params, state.critic.params


def assemble_learner(
    cfg: ActorCriticConfig,
    spec: EnvSpec,
    acting: Acting,
    init_fn: Callable[[jax.Array], AC],
    critic_step: StepFn[AC],
    actor_step: StepFn[AC],
    critic_metric_names: Sequence[str],
    actor_metric_names: Sequence[str],
) -> Learner[AC]:
    """A Learner from an algorithm's two steps: the fusion and the metric bookkeeping are shared."""
    if isinstance(cfg, ExploresWithGSDE) and cfg.gsde is not None:
        actor_step, actor_metric_names = with_exploration_std(actor_step), (*actor_metric_names, "train/std")
    buffer = make_uniform_buffer(cfg.buffer_size, spec)
    gradient_steps = make_gradient_steps(cfg, critic_step, actor_step, actor_metric_names)
    return Learner(
        init_fn=init_fn,
        update_fn=make_update(cfg, buffer, gradient_steps),
        storage=replay_storage(buffer),
        collection=replay_collection(cfg),
        train_fn=make_train(cfg, buffer, gradient_steps),
        gradient_steps_fn=gradient_steps,
        metric_names=(*critic_metric_names, *actor_metric_names, *SCHEDULE_METRICS),
        critic_step_fn=critic_step,
        actor_step_fn=actor_step,
        acting=acting,
        parameters=actor_and_critic_params,
        activation_bytes=update_activation_bytes(cfg, spec),
    )


def with_exploration_std(actor_step: StepFn[AC]) -> StepFn[AC]:
    """`actor_step` that also reports train/std, SB3's mean of gSDE's exploration std after the step."""

    def step(state: AC, batch: Transition, key: jax.Array) -> tuple[AC, Metrics]:
        state, metrics = actor_step(state, batch, key)
        std = state.actor.apply_fn(state.actor.variables(), method="exploration_std")
        return state, {**metrics, "train/std": std.mean()}

    return step
