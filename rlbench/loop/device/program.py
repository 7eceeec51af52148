"""The device loop's programs, pure and not yet compiled: a chunk of vector steps of every seed as one
`lax.scan`, and a deterministic evaluation of every seed on its own envs.

One vector step does what a host-loop step does, in the same order and with the same keys: act (uniform
random before learning_starts; else the learner's `explore` with its act key, gSDE's matrices redrawn first
when its schedule says so), step the envs (automatic
resets, truncation kept apart from termination: rlbench.envs.jax_native.vector), insert the transitions
(next_obs is the true final observation), and, every train_freq vector steps once more than the update
start's env steps were taken, the learner's fused gradient steps on a batch sampled with its own key. The
host loop's fused iteration inserts, trains and acts in one call; here the next step acts with the trained
state, which is the same computation. The one difference: the warm-up's uniform actions come from the act
key (the host loop draws them with numpy), so a run with learning_starts > 0 differs from the host loop's
during the warm-up only in which random actions it takes.

An on-policy learner (PPO, A2C: `Collection.stages_rollout`) keeps no buffer: each vector step writes its
transitions (truncation included) into the rollout staged on the device, row for row where the host loop's
PendingTransitions holds them, and every n_steps vector steps the learner's `update_fn` takes the whole
rollout, as the host loop's training iteration takes the staged one: the same function on the same arrays.

A chunk has one compiled length; `steps_to_run` (traced) of them run and the rest are skipped under a
`lax.cond`, so the host can stop at any due point without another compilation. An evaluation runs in calls
of at most `max_steps` (traced) vector steps, so that none outlasts the host's next look at a stop request.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple, cast

import jax
import jax.numpy as jnp
import numpy as np
from jax.typing import ArrayLike

from rlbench.algos.common.config import LearnerConfig
from rlbench.algos.common.learner import Learner
from rlbench.algos.common.seed_axis import SeedAxis
from rlbench.buffers.uniform import UniformBuffer
from rlbench.envs.jax_native.env import JaxEnv
from rlbench.envs.jax_native.vector import EnvCarry, reset_envs, step_envs
from rlbench.loop.compiled import DeviceCarry
from rlbench.types import Metrics, PyTree, Transition


class ChunkInputs(NamedTuple):
    """The host's scalars for one chunk: vector steps done before it, how many of the chunk's steps run,
    the env steps after which training starts (learning_starts, later after a resume without a buffer),
    the run's length and which seeds train (None for one seed). The host passes numpy scalars; inside the
    compiled chunk every leaf is a jax.Array."""

    vector_steps: ArrayLike  # int32
    steps_to_run: ArrayLike  # int32 vector steps, <= the chunk length
    update_start: ArrayLike  # int32
    n_timesteps: ArrayLike  # float32: the run's length, for progress_remaining (learning-rate schedules)
    training: ArrayLike | None = None  # [n_seeds] bool


class ChunkOutputs(NamedTuple):
    """Per vector step of the chunk ([chunk length, (n_seeds,) n_envs]; steps past steps_to_run are zeros): each
    env's reward and whether its episode ended there; and whether any training ran."""

    reward: jax.Array
    done: jax.Array
    trained: jax.Array  # bool scalar


class RunShape(NamedTuple):
    """The settings a chunk is compiled for; `train_freq` is the vector steps between updates (an on-policy
    learner's n_steps)."""

    n_envs: int
    learning_starts: int
    train_freq: int
    chunk_length: int


ChunkFn = Callable[[DeviceCarry, ChunkInputs], tuple[DeviceCarry, ChunkOutputs]]
# Per vector step: (reward, done, whether it trained)
StepOutputs = tuple[jax.Array, jax.Array, jax.Array]
# One seed's (state, buffer state, staged rollout (None off-policy), progress_remaining, first_step, training)
#   -> (state, buffer state, metrics)
LearnFn = Callable[
    [PyTree, PyTree, Transition | None, jax.Array, jax.Array, jax.Array | None], tuple[PyTree, PyTree, Metrics]
]
# (stored: the buffer state or the staged rollout, transitions [n_envs, ...], vector steps into the rollout) -> stored
InsertFn = Callable[[PyTree, Transition, jax.Array], PyTree]
# One seed's (state, stored, envs, act key, warming up, vector steps into the rollout)
#   -> (state, stored, envs, act key, reward, done)
CollectFn = Callable[
    [PyTree, PyTree, EnvCarry, jax.Array, jax.Array, jax.Array],
    tuple[PyTree, PyTree, EnvCarry, jax.Array, jax.Array, jax.Array],
]


def make_chunk(
    cfg: LearnerConfig,
    learner: Learner[PyTree],
    buffer: UniformBuffer | None,
    env: JaxEnv,
    axis: SeedAxis,
    shape: RunShape,
) -> ChunkFn:
    """(DeviceCarry, ChunkInputs) -> (DeviceCarry, ChunkOutputs): up to `shape.chunk_length` vector steps
    (`buffer`: None for an on-policy learner)."""
    stages_rollout = learner.collection.stages_rollout
    collect = _collect_fn(learner, _insert_fn(stages_rollout, buffer, shape.n_envs), env, shape.n_envs)
    learn = _learn_fn(learner)

    def vector_step(
        carry: DeviceCarry, inputs: ChunkInputs, vector_steps: jax.Array
    ) -> tuple[DeviceCarry, StepOutputs]:
        env_steps = vector_steps * shape.n_envs  # before this step
        warming_up = env_steps < shape.learning_starts
        stored = carry.rollout if stages_rollout else carry.buffer_state
        state, stored, envs, act_key, reward, done = axis.map(collect, shared_argnums=(4, 5))(
            carry.state, stored, carry.envs, carry.act_key, warming_up, vector_steps % shape.train_freq
        )
        rollout, buffer_state = (stored, carry.buffer_state) if stages_rollout else (None, stored)
        env_steps = env_steps + shape.n_envs
        due = ((vector_steps + 1) % shape.train_freq == 0) & (env_steps > inputs.update_start)
        progress_remaining = (1.0 - env_steps / inputs.n_timesteps).astype(jnp.float32)

        def trained() -> tuple[PyTree, PyTree, Metrics]:
            first_step = axis.first(state.step)  # seeds advance in lockstep: the actor branch stays a branch
            return axis.map(learn, shared_argnums=(3, 4))(
                state, buffer_state, rollout, progress_remaining, first_step, inputs.training
            )

        state, buffer_state, metrics = jax.lax.cond(due, trained, lambda: (state, buffer_state, carry.metrics))
        return DeviceCarry(state, buffer_state, envs, act_key, metrics, rollout), (reward, done, due)

    def chunk(carry: DeviceCarry, inputs: ChunkInputs) -> tuple[DeviceCarry, ChunkOutputs]:
        n_seeds_envs = carry.envs.elapsed.shape  # [(n_seeds,) n_envs]

        def step_or_skip(scan_carry: DeviceCarry, index: jax.Array) -> tuple[DeviceCarry, StepOutputs]:
            def skipped() -> tuple[DeviceCarry, StepOutputs]:
                zeros = (jnp.zeros(n_seeds_envs, jnp.float32), jnp.zeros(n_seeds_envs, bool), jnp.array(False))
                return scan_carry, zeros

            vector_steps = cast(jax.Array, inputs.vector_steps)  # traced: every input is a jax.Array here
            stepped: tuple[DeviceCarry, StepOutputs] = jax.lax.cond(
                index < inputs.steps_to_run,
                lambda: vector_step(scan_carry, inputs, vector_steps + index),
                skipped,
            )
            return stepped

        carry, (reward, done, due) = jax.lax.scan(step_or_skip, carry, jnp.arange(shape.chunk_length))
        return carry, ChunkOutputs(reward, done, due.any())

    return chunk


def _learn_fn(learner: Learner[PyTree]) -> LearnFn:
    """One seed's training, when due: the learner's update on the staged rollout (on-policy, as the host loop's
    training iteration), or its gradient steps sampled from the replay buffer."""
    stages_rollout = learner.collection.stages_rollout

    def learn(
        state: PyTree,
        buffer_state: PyTree,
        rollout: Transition | None,
        progress_remaining: jax.Array,
        first_step: jax.Array,
        training: jax.Array | None,
    ) -> tuple[PyTree, PyTree, Metrics]:
        if stages_rollout:  # the host loop's training iteration on the staged rollout
            assert rollout is not None, "an on-policy learner's rollout is staged on the device"
            updated, buffer_state, metrics = learner.update_fn(
                state, buffer_state, rollout, progress_remaining, first_step, None
            )
        else:
            assert learner.train_fn is not None, "an off-policy learner trains from its replay buffer"
            updated, metrics = learner.train_fn(state, buffer_state, progress_remaining, first_step, None)
        if training is not None:  # several seeds: one that diverged stays at its last finite state
            updated = jax.lax.cond(training, lambda: updated, lambda: state)
        return updated, buffer_state, metrics

    return learn


def _insert_fn(stages_rollout: bool, buffer: UniformBuffer | None, n_envs: int) -> InsertFn:
    """(stored, transitions [n_envs, ...], vector steps into the rollout) -> stored: into the replay buffer, or
    an on-policy learner's staged rollout at the rows the host loop's PendingTransitions fill."""
    if not stages_rollout:
        assert buffer is not None, "an off-policy learner's transitions go to its replay buffer"
        # A replay buffer keeps no truncation column: the time limit is in `terminated` = 0 already.
        return lambda buffer_state, new, steps_in_rollout: buffer.add_fn(buffer_state, new._replace(truncated=None))

    def stage(rollout: Transition, transition: Transition, steps_in_rollout: jax.Array) -> Transition:
        row = steps_in_rollout * n_envs
        staged_rows: Transition = jax.tree.map(
            lambda staged, new: jax.lax.dynamic_update_slice_in_dim(staged, new.astype(staged.dtype), row, 0),
            rollout,
            transition,
        )
        return staged_rows

    return stage


def _collect_fn(learner: Learner[PyTree], insert: InsertFn, env: JaxEnv, n_envs: int) -> CollectFn:
    """One seed's vector step of experience: act, step its envs, insert (or stage) the transitions."""
    acting, action_dim = learner.acting, env.spec.action_dim

    def act(
        state: PyTree, envs: EnvCarry, act_key: jax.Array, warming_up: jax.Array, steps_in_rollout: jax.Array
    ) -> tuple[jax.Array, PyTree, jax.Array]:
        def explore() -> tuple[jax.Array, PyTree, jax.Array]:
            # gSDE's matrices are redrawn on its schedule before the action (the host loop: at a rollout's start
            # after a training iteration, or in collect.act); with nothing to redraw, `never` is False.
            # Acting.resample_due takes a traced int32 here, as every schedule in rlbench.algos does (typed int)
            resample_due = acting.resample_due(steps_in_rollout)  # type: ignore[arg-type]
            redrawn = jax.lax.cond(resample_due, acting.resample, lambda s: s, state)
            return acting.explore(redrawn, envs.obs, act_key, envs.elapsed == 0)

        def uniform() -> tuple[jax.Array, PyTree, jax.Array]:
            key, draw = jax.random.split(act_key)
            action = jax.random.uniform(draw, (n_envs, action_dim), jnp.float32, -1.0, 1.0)
            return action, state.exploration, key

        if not acting.random_warmup:  # gSDE's use_sde_at_warmup explores from the first step
            return explore()
        acted: tuple[jax.Array, PyTree, jax.Array] = jax.lax.cond(warming_up, uniform, explore)
        return acted

    def collect(
        state: PyTree,
        stored: PyTree,
        envs: EnvCarry,
        act_key: jax.Array,
        warming_up: jax.Array,
        steps_in_rollout: jax.Array,
    ) -> tuple[PyTree, PyTree, EnvCarry, jax.Array, jax.Array, jax.Array]:
        action, exploration, act_key = act(state, envs, act_key, warming_up, steps_in_rollout)
        # step_envs clips a Box action to [-1, 1] for the env; the rollout keeps the sample (SB3's PPO).
        next_envs, step = step_envs(env, envs, action)
        transition = Transition(
            obs=envs.obs,
            action=action,
            reward=step.reward,
            next_obs=step.final_obs,  # the true last observation of an episode that ended
            terminated=step.terminated.astype(jnp.float32),  # a time limit bootstraps: never across a reset
            truncated=step.truncated.astype(jnp.float32),  # not terminated (vector.py): GAE bootstraps there
        )
        stored = insert(stored, transition, steps_in_rollout)
        done = step.terminated | step.truncated
        return state.replace(exploration=exploration), stored, next_envs, act_key, step.reward, done

    return collect


class Evaluation(NamedTuple):
    """An evaluation under way, every leaf with the seed axis: its envs, each env's episodes counted so far and
    the one it is in, and the returns and lengths of the counted ones ([(n_seeds,) n_episodes], env after env:
    env i's episodes together)."""

    envs: EnvCarry
    counts: jax.Array  # [(n_seeds,) n_eval_envs] int32
    episode_return: jax.Array  # float32
    episode_length: jax.Array  # int32
    returns: jax.Array  # [(n_seeds,) n_episodes] float32
    lengths: jax.Array  # int32


class EvalPrograms(NamedTuple):
    """A deterministic evaluation in calls that each return to the host (which polls for a stop between
    them): `start` resets the envs, `advance` runs up to `max_steps` vector steps of it."""

    start: Callable[[ArrayLike], Evaluation]  # eval env seeds [(n_seeds,) n_eval_envs] uint32 -> Evaluation
    # (states, Evaluation (donated), max_steps int32) -> (Evaluation, done: bool scalar)
    advance: Callable[[PyTree, Evaluation, ArrayLike], tuple[Evaluation, jax.Array]]


def make_evaluate(
    learner: Learner[PyTree], env: JaxEnv, axis: SeedAxis, n_eval_envs: int, n_episodes: int
) -> tuple[Callable[[jax.Array], Evaluation], Callable[[PyTree, Evaluation, jax.Array], tuple[Evaluation, jax.Array]]]:
    """(start, advance) of every seed's deterministic policy for `n_episodes` whole episodes on envs reset
    from the given seeds, spread over the envs as SB3's evaluate_policy spreads them (env i runs
    (n_episodes + i) // n_eval_envs; extra episodes are not counted). Each vector step is the same computation
    however the steps are split into calls, so the results are too."""
    targets = jnp.asarray([(n_episodes + i) // n_eval_envs for i in range(n_eval_envs)], jnp.int32)
    first_slot = jnp.asarray(np.concatenate([[0], np.cumsum(np.asarray(targets))[:-1]]), jnp.int32)
    evaluate_action = learner.acting.evaluate

    def start(seeds: jax.Array) -> Evaluation:
        zeros = jnp.zeros(n_eval_envs, jnp.int32)
        returns, lengths = jnp.zeros(n_episodes, jnp.float32), jnp.zeros(n_episodes, jnp.int32)
        return Evaluation(reset_envs(env, seeds), zeros, zeros.astype(jnp.float32), zeros, returns, lengths)

    def step(state: PyTree, c: Evaluation) -> Evaluation:
        envs, out = step_envs(env, c.envs, evaluate_action(state, c.envs.obs))
        episode_return, length = c.episode_return + out.reward, c.episode_length + 1
        ended = out.terminated | out.truncated
        counted = ended & (c.counts < targets)
        slot = jnp.where(counted, first_slot + c.counts, n_episodes)  # n_episodes: out of range, dropped
        return Evaluation(
            envs=envs,
            counts=c.counts + counted,
            episode_return=jnp.where(ended, 0.0, episode_return),
            episode_length=jnp.where(ended, 0, length),
            returns=c.returns.at[slot].set(episode_return, mode="drop"),
            lengths=c.lengths.at[slot].set(length, mode="drop"),
        )

    def advance(state: PyTree, evaluation: Evaluation, max_steps: jax.Array) -> tuple[Evaluation, jax.Array]:
        def running(c: tuple[Evaluation, ArrayLike]) -> jax.Array:
            return (c[0].counts < targets).any() & (c[1] < max_steps)

        evaluation, _ = jax.lax.while_loop(running, lambda c: (step(state, c[0]), c[1] + 1), (evaluation, 0))
        return evaluation, (evaluation.counts >= targets).all()

    def advance_all(states: PyTree, evaluation: Evaluation, max_steps: jax.Array) -> tuple[Evaluation, jax.Array]:
        evaluation, done = axis.map(advance, shared_argnums=(2,))(states, evaluation, max_steps)
        return evaluation, jnp.all(done)

    return axis.map(start), advance_all


def initial_metrics(
    learner: Learner[PyTree], axis: SeedAxis, state: PyTree, buffer_state: PyTree, rollout: Transition | None
) -> Metrics:
    """Training metrics of the structure the update returns, all NaN (zeros for integers): what the carry
    holds until the first training step (the host only reads a chunk's metrics when it trained)."""

    def metrics(state: PyTree, buffer_state: PyTree, rollout: Transition | None) -> Metrics:
        if rollout is not None:
            return learner.update_fn(state, buffer_state, rollout, jnp.float32(1.0), jnp.int32(0), None)[2]
        assert learner.train_fn is not None, "an off-policy learner trains from its replay buffer"
        return learner.train_fn(state, buffer_state, jnp.float32(1.0), jnp.int32(0), None)[1]

    shapes = jax.eval_shape(axis.map(metrics), state, buffer_state, rollout)
    filled: Metrics = jax.tree.map(
        lambda s: jnp.full(s.shape, jnp.nan if jnp.issubdtype(s.dtype, jnp.floating) else 0, s.dtype), shapes
    )
    return filled


class DevicePrograms(NamedTuple):
    """The device loop's compiled programs (its only `jax.jit` sites)."""

    chunk: ChunkFn  # the carry donated
    evaluate: EvalPrograms | None  # None without evaluations
    reset: Callable[[ArrayLike], EnvCarry]  # env seeds [(n_seeds,) n_envs] uint32 -> EnvCarry


def compile_device_programs(
    cfg: LearnerConfig,
    learner: Learner[PyTree],
    buffer: UniformBuffer | None,
    axis: SeedAxis,
    env: JaxEnv,
    eval_env: JaxEnv | None,
    shape: RunShape,
    n_eval_envs: int,
    n_eval_episodes: int,
) -> DevicePrograms:
    evaluate = None
    if eval_env is not None:
        start, advance = make_evaluate(learner, eval_env, axis, n_eval_envs, n_eval_episodes)
        evaluate = EvalPrograms(jax.jit(start), jax.jit(advance, donate_argnums=1))
    return DevicePrograms(
        chunk=jax.jit(make_chunk(cfg, learner, buffer, env, axis, shape), donate_argnums=0),
        evaluate=evaluate,
        reset=jax.jit(axis.map(lambda seeds: reset_envs(env, seeds))),
    )
