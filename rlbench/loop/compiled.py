"""Every `jax.jit` of the host loop's training, in one place: the loop's entry points into the device, the
divergence checks' programs, the seed axis's stacking and slicing, and the acting programs of a policy loaded
from a checkpoint (run/policy.py). The device loop compiles its own programs in one place too
(rlbench.loop.device.program.compile_device_programs), and a JAX-native env wrapped for gymnasium its
steps (rlbench.envs.jax_native.gym_env); no other module of rlbench calls `jax.jit`, except bench/ for its
own measurements.

A training iteration is one device call, `update(carry, inputs) -> (carry, outputs)`: it inserts the new
transitions, runs all of the iteration's gradient steps, and returns the action for the next env step
from the updated actor. The carry (learner states and replay buffers, with the seed axis) is donated, so
updates happen in place; `IterationInputs` and `IterationOutputs` name what else crosses per call. Each
array passed in or out costs the host a few microseconds at dispatch (benchmarks/loop_overhead.py), and the
learner state alone has 77 (SAC): packing it into a few flat arrays was measured and not kept (its
unpacking and packing inside the program cost more than the dispatch saved).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple, TypeVar, cast

import jax
import jax.numpy as jnp
from jax.typing import ArrayLike

from rlbench.algos.common.acting import Acting
from rlbench.algos.common.config import LearnerConfig
from rlbench.algos.common.divergence import all_finite
from rlbench.algos.common.learner import Learner
from rlbench.algos.common.seed_axis import SeedAxis
from rlbench.buffers.normalization import Normalization, normalize_obs
from rlbench.config.algorithm import Algorithm
from rlbench.envs.jax_native.vector import EnvCarry
from rlbench.types import EnvSpec, Metrics, PyTree, Transition

T = TypeVar("T")


class Carry(NamedTuple):
    """The host loop's carry, which is its LoopRun's: what a training iteration updates in place (donated), the
    learner states and their storage (replay buffers; nothing for an on-policy learner)."""

    state: PyTree
    buffer_state: PyTree


class DeviceCarry(NamedTuple):
    """The device loop's carry (rlbench.loop.device), which is its LoopRun's: what its chunks update in place
    (donated), every leaf with the seed axis when there are several seeds: learner states, replay buffers, the
    training envs, the act keys, the last training metrics, and an on-policy learner's rollout staged so far
    ([(n_seeds,) n_steps * n_envs, ...] step after step, with `truncated`; None off-policy)."""

    state: PyTree
    buffer_state: PyTree
    envs: EnvCarry
    act_key: jax.Array
    metrics: dict[str, jax.Array]
    rollout: Transition | None = None


class IterationInputs(NamedTuple):
    """The host's part of one training iteration: the staged transitions, how much of the run is left,
    the observations to act on and the acting key; the statistics of `normalize` (None without it),
    which seeds still train (None for one seed: nothing to freeze), and which envs start an episode with
    `obs` (their exploration noise restarts; None: none does, or the algorithm does not read it). The host
    passes numpy values; inside the compiled iteration every leaf is a jax.Array."""

    new: Transition
    progress_remaining: ArrayLike  # float32 scalar
    obs: ArrayLike  # [(n_seeds,) n_envs, obs_dim]
    act_key: jax.Array
    normalization: Normalization | None
    training: ArrayLike | None = None  # [n_seeds] bool
    episode_start: ArrayLike | None = None  # [(n_seeds,) n_envs] bool


class IterationOutputs(NamedTuple):
    """The iteration's training metrics (device arrays until logged), the next action and acting key."""

    metrics: dict[str, jax.Array]
    action: jax.Array
    act_key: jax.Array


# The entry points' signatures, as the host calls them (numpy values where it has them; the learner states,
# buffer states and keys are the device's, with the seed axis when there are several seeds).
# (learner states, obs [(n_seeds,) n_envs, obs_dim], act keys, episode starts (None: all False), normalization,
#  progress_remaining) -> (actions, exploration states, act keys)
ActFn = Callable[
    [PyTree, ArrayLike, jax.Array, ArrayLike | None, Normalization | None, ArrayLike],
    tuple[jax.Array, PyTree, jax.Array],
]
# (learner states, obs, normalization) -> the deterministic actions
ActDeterministicFn = Callable[[PyTree, ArrayLike, Normalization | None], jax.Array]
# (learner states, buffer states (donated), progress_remaining, normalization, n_steps) -> (learner states, metrics)
TrainStepsFn = Callable[[PyTree, PyTree, ArrayLike, Normalization | None, ArrayLike], tuple[PyTree, Metrics]]
IterationFn = Callable[[Carry, IterationInputs], tuple[Carry, IterationOutputs]]


@dataclass(frozen=True)
class EntryPoints:
    """A run's compiled entry points, all of them, with the learner and seed axis they were built for: each
    one call into the device. `train_steps` is None for a learner without a replay buffer (on-policy)."""

    learner: Learner[PyTree]
    axis: SeedAxis
    init: Callable[[jax.Array], PyTree]  # one seed's key -> its initial learner state
    init_buffers: Callable[[], PyTree]  # every seed's empty storage
    act: ActFn
    act_deterministic: ActDeterministicFn
    insert: Callable[[PyTree, Transition], PyTree]  # (buffer states (donated), new transitions) -> buffer states
    update: IterationFn  # the carry donated
    train_steps: TrainStepsFn | None
    copy_seed_slice: Callable[[PyTree, PyTree, int], PyTree]  # (states (donated), source, seed index) -> states
    resample_exploration: Callable[[PyTree], PyTree]  # learner states (donated) -> with new exploration states


# Recent runs' entry points by (learner factory, config, env spec, number of seeds): a run in the same
# process with the same four (a resume, an Optuna trial that repeats a configuration, the tests' in-process
# runs) calls the programs already traced and compiled instead of tracing, lowering and loading them again,
# 1-2 s per run on a CPU. A few only: each holds its compiled programs.
N_RECENT_ENTRY_POINTS = 4


def entry_points(algo: Algorithm, cfg: LearnerConfig, spec: EnvSpec, n_seeds: int) -> EntryPoints:
    """The compiled entry points of `algo` with `cfg` on `spec` for `n_seeds` seeds: recent ones reused."""
    return _entry_points(algo.make_learner, cfg, spec, n_seeds)


@functools.lru_cache(maxsize=N_RECENT_ENTRY_POINTS)
def _entry_points(
    make_learner: Callable[[LearnerConfig, EnvSpec], Learner[PyTree]], cfg: LearnerConfig, spec: EnvSpec, n_seeds: int
) -> EntryPoints:
    axis = seed_axis(n_seeds)
    learner = make_learner(cfg, spec)
    storage, acting = learner.storage, learner.acting

    # The policy acts on observations scaled by the statistics of `normalize` (None: as the env gives them).
    def act(
        state: PyTree,
        obs: jax.Array,
        act_key: jax.Array,
        episode_start: jax.Array | None,
        normalization: Normalization | None,
        progress_remaining: jax.Array,
    ) -> tuple[jax.Array, PyTree, jax.Array]:
        """(action, exploration state, act key): the loop puts the exploration state back into its state.
        `episode_start` is None when the algorithm's acting does not read it."""
        if episode_start is None:
            episode_start = jnp.zeros(obs.shape[:1], bool)
        return acting.explore(state, normalize_obs(obs, normalization), act_key, episode_start, progress_remaining)

    def act_deterministic(state: PyTree, obs: jax.Array, normalization: Normalization | None) -> jax.Array:
        return acting.evaluate(state, normalize_obs(obs, normalization))

    def train_steps(
        state: PyTree,
        buffer_state: PyTree,
        progress_remaining: jax.Array,
        normalization: Normalization | None,
        n_steps: jax.Array,
    ) -> tuple[PyTree, Metrics]:
        """train_freq in episodes (one seed): the first n_steps of steps_per_update(cfg) gradient steps."""
        assert learner.train_fn is not None, "compiled only for a learner with a replay buffer"
        return learner.train_fn(state, buffer_state, progress_remaining, state.step, normalization, n_steps)

    def copy_seed_slice(state: PyTree, source: PyTree, index: jax.Array) -> PyTree:
        """`state` with seed `index`'s slice taken from `source` (both with the seed axis)."""
        return jax.tree.map(lambda to, of: to.at[index].set(of[index]), state, source)

    return EntryPoints(
        learner=learner,
        axis=axis,
        init=jax.jit(learner.init_fn),
        init_buffers=jax.jit(lambda: axis.broadcast(storage.init_fn())),
        act=given_policy_part(jax.jit(axis.map(act, shared_argnums=(5,))), acting),
        act_deterministic=given_policy_part(jax.jit(axis.map(act_deterministic)), acting),
        insert=jax.jit(axis.map(storage.insert_fn), donate_argnums=0),
        update=jax.jit(iteration(axis, learner), donate_argnums=0),
        train_steps=None if learner.train_fn is None else jax.jit(train_steps, donate_argnums=0),
        copy_seed_slice=jax.jit(copy_seed_slice, donate_argnums=0),
        resample_exploration=jax.jit(axis.map(acting.resample), donate_argnums=0),
    )


def given_policy_part(program: Callable[..., T], acting: Acting) -> Callable[..., T]:
    """`program(state, ...)` called with only the part of the learner state that acting reads: called once per
    env step, and each array argument costs that call time (Acting.policy_part)."""

    def call(state: PyTree, *args: object) -> T:
        return program(acting.policy_part(state), *args)

    return call


def iteration(axis: SeedAxis, learner: Learner[PyTree]) -> IterationFn:
    """One training iteration of every seed, not yet compiled: the learner's update on the new transitions,
    resample the exploration state when the algorithm redraws it at a rollout's start (gSDE), act on the next
    observations with the updated actor."""
    update, acting = learner.update_fn, learner.acting

    def update_then_act(carry: Carry, inputs: IterationInputs) -> tuple[Carry, IterationOutputs]:
        # All seeds advance in lockstep: one unbatched counter keeps the policy-delay branch a branch.
        first_step = axis.first(carry.state.step)
        progress_remaining = cast(jax.Array, inputs.progress_remaining)  # traced: every input is a jax.Array here

        def one_seed(
            state: PyTree,
            buffer_state: PyTree,
            new: Transition,
            obs: jax.Array,
            act_key: jax.Array,
            normalization: Normalization | None,
            training: jax.Array | None,
            episode_start: jax.Array | None,
        ) -> tuple[PyTree, PyTree, Metrics, jax.Array, jax.Array]:
            updated, buffer_state, metrics = update(
                state, buffer_state, new, progress_remaining, first_step, normalization
            )
            if training is not None:  # several seeds: one that diverged stays at its last finite state
                updated = jax.lax.cond(training, lambda: updated, lambda: state)
            if acting.resample_due(0):  # a rollout starts: new exploration matrices (gSDE)
                updated = acting.resample(updated)
            if episode_start is None:
                episode_start = jnp.zeros(obs.shape[:1], bool)
            action, exploration, act_key = acting.explore(
                updated, normalize_obs(obs, normalization), act_key, episode_start, progress_remaining
            )
            return updated.replace(exploration=exploration), buffer_state, metrics, action, act_key

        per_seed = (
            inputs.new, inputs.obs, inputs.act_key, inputs.normalization, inputs.training, inputs.episode_start
        )  # fmt: skip
        state, buffer_state, metrics, action, act_key = axis.map(one_seed)(carry.state, carry.buffer_state, *per_seed)
        return Carry(state, buffer_state), IterationOutputs(metrics, action, act_key)

    return update_then_act  # its name names the compiled program (and its compilation-cache entries)


# -- the divergence checks (rlbench.loop.divergence_guard) ------------------------------------------------------
# Module-level programs: every run of a process (and every seed count) calls the same ones, traced once.

# A copy of a state on the device, which survives the next donation of the state
device_copy: Callable[[PyTree], PyTree] = jax.jit(lambda state: jax.tree.map(jnp.copy, state))


@functools.cache
def all_finite_per_seed(n_seeds: int) -> Callable[[PyTree], jax.Array]:
    """[n_seeds] bool (a scalar for one seed): whether each seed's learner state is all finite."""
    return jax.jit(SeedAxis(n_seeds).map(all_finite))


# -- the seed axis -----------------------------------------------------------------------------------------
# Stacking and slicing a whole state as one compiled program each: op by op, `jnp.stack` and `x[i]` compile
# once per distinct leaf shape (SAC's state has 77 leaves), slower at a run's start and at every later call
# (benchmarks/README.md, "Moved from code comments"). The index is traced: one program serves every seed.

_stack_every_leaf = jax.jit(lambda trees: jax.tree.map(lambda *xs: jnp.stack(xs), *trees))
_slice_every_leaf = jax.jit(
    lambda tree, i: jax.tree.map(lambda x: jax.lax.dynamic_index_in_dim(x, i, keepdims=False), tree)
)


def seed_axis(n_seeds: int) -> SeedAxis:
    """The seed axis of a run of `n_seeds`, stacking and slicing whole states as one program each."""
    return SeedAxis(n_seeds, stack_leaves=_stack_every_leaf, slice_leaves=_slice_every_leaf)


# -- acting with a policy loaded from a checkpoint (rlbench.run.policy) ---------------------------------


@dataclass(frozen=True)
class PolicyPrograms:
    init: Callable[[jax.Array], PyTree]  # key -> a learner state of the right structure, for a checkpoint to fill
    # (state, obs, key, normalization) -> (action, key)
    sample: Callable[[PyTree, ArrayLike, jax.Array, Normalization | None], tuple[jax.Array, jax.Array]]
    act_deterministic: ActDeterministicFn  # (state, obs, normalization) -> action


def policy_programs(learner: Learner[PyTree]) -> PolicyPrograms:
    acting = learner.acting
    sample = jax.jit(lambda state, obs, key, norm: acting.sample(state, normalize_obs(obs, norm), key))
    act_deterministic = jax.jit(lambda state, obs, norm: acting.evaluate(state, normalize_obs(obs, norm)))
    return PolicyPrograms(
        init=jax.jit(learner.init_fn),
        sample=given_policy_part(sample, acting),
        act_deterministic=given_policy_part(act_deterministic, acting),
    )
