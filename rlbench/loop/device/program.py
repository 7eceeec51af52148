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
from rlbench.envs.jax_native.vector import EnvCarry, EnvStep, Reported
from rlbench.loop.compiled import DeviceCarry
from rlbench.loop.device.envs import DeviceEnvs
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
    """Per vector step of the chunk ([chunk length, (n_seeds,) n_envs]; steps past steps_to_run are zeros): what
    each env reported (rlbench.envs.jax_native.vector.Reported: the reward its counted episode adds, whether that
    episode ended there, whether the step was a transition); and whether any training ran."""

    reward: jax.Array
    done: jax.Array
    valid: jax.Array
    trained: jax.Array  # bool scalar


class RunShape(NamedTuple):
    """The settings a chunk is compiled for; `train_freq` is the vector steps between updates (an on-policy
    learner's n_steps)."""

    n_envs: int
    learning_starts: int
    train_freq: int
    chunk_length: int


ChunkFn = Callable[[DeviceCarry, ChunkInputs], tuple[DeviceCarry, ChunkOutputs]]
# Per vector step: (reward, done, valid, whether it trained)
StepOutputs = tuple[jax.Array, jax.Array, jax.Array, jax.Array]
# One seed's (state, buffer state, staged rollout (None off-policy), progress_remaining, first_step, training)
#   -> (state, buffer state, metrics)
LearnFn = Callable[
    [PyTree, PyTree, Transition | None, jax.Array, jax.Array, jax.Array | None], tuple[PyTree, PyTree, Metrics]
]
# One seed's (stored: the buffer state or the staged rollout, transitions [n_envs, ...], valid [n_envs], vector
#   steps into the rollout) -> stored
InsertFn = Callable[[PyTree, Transition, jax.Array, jax.Array], PyTree]
# One seed's (state, envs, act key, warming up, vector steps into the rollout, progress_remaining) -> (action,
#   exploration, act key)
ActFn = Callable[[PyTree, EnvCarry, jax.Array, jax.Array, jax.Array, jax.Array], tuple[jax.Array, PyTree, jax.Array]]


def make_chunk(
    cfg: LearnerConfig,
    learner: Learner[PyTree],
    buffer: UniformBuffer | None,
    envs: DeviceEnvs,
    axis: SeedAxis,
    shape: RunShape,
) -> ChunkFn:
    """(DeviceCarry, ChunkInputs) -> (DeviceCarry, ChunkOutputs): up to `shape.chunk_length` vector steps
    (`buffer`: None for an on-policy learner)."""
    stages_rollout = learner.collection.stages_rollout
    act = axis.map(_act_fn(learner, envs.spec.action_dim, shape.n_envs), shared_argnums=(3, 4, 5))
    insert = axis.map(_insert_fn(stages_rollout, buffer, shape.n_envs, envs.has_reset_steps), shared_argnums=(3,))
    learn = _learn_fn(learner)

    def vector_step(
        carry: DeviceCarry, inputs: ChunkInputs, vector_steps: jax.Array
    ) -> tuple[DeviceCarry, StepOutputs]:
        env_steps = vector_steps * shape.n_envs  # before this step
        warming_up = env_steps < shape.learning_starts
        steps_in_rollout = vector_steps % shape.train_freq
        acting_progress = (1.0 - env_steps / inputs.n_timesteps).astype(jnp.float32)
        action, exploration, act_key = act(
            carry.state, carry.envs, carry.act_key, warming_up, steps_in_rollout, acting_progress
        )
        # A Box action is clipped to [-1, 1] for the env; the rollout keeps the sample (SB3's PPO).
        next_envs, step, reported = envs.step(carry.envs, action)
        transition = _transition(carry.envs.obs, action, step)
        stored = insert(
            carry.rollout if stages_rollout else carry.buffer_state, transition, reported.valid, steps_in_rollout
        )
        state = carry.state.replace(exploration=exploration)
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
        outputs = (reported.reward, reported.ended, reported.valid, due)
        return DeviceCarry(state, buffer_state, next_envs, act_key, metrics, rollout), outputs

    return _scanned(vector_step, shape.chunk_length)


def _transition(obs: jax.Array, action: jax.Array, step: EnvStep) -> Transition:
    return Transition(
        obs=obs,
        action=action,
        reward=step.reward,
        next_obs=step.final_obs,  # the true last observation of an episode that ended
        terminated=step.terminated.astype(jnp.float32),  # a time limit bootstraps: never across a reset
        truncated=step.truncated.astype(jnp.float32),  # not terminated (vector.py): GAE bootstraps there
    )


def _scanned(
    vector_step: Callable[[DeviceCarry, ChunkInputs, jax.Array], tuple[DeviceCarry, StepOutputs]], chunk_length: int
) -> ChunkFn:
    """The chunk: `chunk_length` vector steps in one scan, those past `steps_to_run` skipped."""

    def chunk(carry: DeviceCarry, inputs: ChunkInputs) -> tuple[DeviceCarry, ChunkOutputs]:
        n_seeds_envs = carry.envs.elapsed.shape  # [(n_seeds,) n_envs]

        def step_or_skip(scan_carry: DeviceCarry, index: jax.Array) -> tuple[DeviceCarry, StepOutputs]:
            def skipped() -> tuple[DeviceCarry, StepOutputs]:
                no_step = jnp.zeros(n_seeds_envs, bool)
                return scan_carry, (jnp.zeros(n_seeds_envs, jnp.float32), no_step, no_step, jnp.array(False))

            vector_steps = cast(jax.Array, inputs.vector_steps)  # traced: every input is a jax.Array here
            stepped: tuple[DeviceCarry, StepOutputs] = jax.lax.cond(
                index < inputs.steps_to_run,
                lambda: vector_step(scan_carry, inputs, vector_steps + index),
                skipped,
            )
            return stepped

        carry, (reward, done, valid, due) = jax.lax.scan(step_or_skip, carry, jnp.arange(chunk_length))
        return carry, ChunkOutputs(reward, done, valid, due.any())

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


def _insert_fn(stages_rollout: bool, buffer: UniformBuffer | None, n_envs: int, has_reset_steps: bool) -> InsertFn:
    """(stored, transitions [n_envs, ...], valid, vector steps into the rollout) -> stored: into the replay buffer
    (its valid rows only, where envs take reset steps), or an on-policy learner's staged rollout at the rows the
    host loop's PendingTransitions fill (every step valid: rlbench.run refuses an on-policy learner otherwise)."""
    if not stages_rollout:
        assert buffer is not None, "an off-policy learner's transitions go to its replay buffer"

        def add(buffer_state: PyTree, new: Transition, valid: jax.Array, steps_in_rollout: jax.Array) -> PyTree:
            new = new._replace(truncated=None)  # no truncation column: the time limit is in `terminated` = 0
            if has_reset_steps:
                return buffer.add_valid_fn(buffer_state, new, valid)
            return buffer.add_fn(buffer_state, new)

        return add
    assert not has_reset_steps, "a rollout has a row for every env and vector step"

    def stage(rollout: Transition, transition: Transition, valid: jax.Array, steps_in_rollout: jax.Array) -> Transition:
        row = steps_in_rollout * n_envs
        staged_rows: Transition = jax.tree.map(
            lambda staged, new: jax.lax.dynamic_update_slice_in_dim(staged, new.astype(staged.dtype), row, 0),
            rollout,
            transition,
        )
        return staged_rows

    return stage


def _act_fn(learner: Learner[PyTree], action_dim: int, n_envs: int) -> ActFn:
    """One seed's actions for its envs: uniform in [-1, 1] while warming up (an algorithm with random warm-up), else
    the learner's exploration, gSDE's matrices redrawn first when its schedule says so."""
    acting = learner.acting

    def act(
        state: PyTree,
        envs: EnvCarry,
        act_key: jax.Array,
        warming_up: jax.Array,
        steps_in_rollout: jax.Array,
        progress_remaining: jax.Array,
    ) -> tuple[jax.Array, PyTree, jax.Array]:
        def explore() -> tuple[jax.Array, PyTree, jax.Array]:
            # gSDE's matrices are redrawn on its schedule before the action (the host loop: at a rollout's start
            # after a training iteration, or in collect.act); with nothing to redraw, `never` is False.
            # Acting.resample_due takes a traced int32 here, as every schedule in rlbench.algos does (typed int)
            resample_due = acting.resample_due(steps_in_rollout)  # type: ignore[arg-type]
            redrawn = jax.lax.cond(resample_due, acting.resample, lambda s: s, state)
            return acting.explore(redrawn, envs.obs, act_key, envs.elapsed == 0, progress_remaining)

        def uniform() -> tuple[jax.Array, PyTree, jax.Array]:
            key, draw = jax.random.split(act_key)
            action = jax.random.uniform(draw, (n_envs, action_dim), jnp.float32, -1.0, 1.0)
            return action, state.exploration, key

        if not acting.random_warmup:  # gSDE's use_sde_at_warmup explores from the first step
            return explore()
        acted: tuple[jax.Array, PyTree, jax.Array] = jax.lax.cond(warming_up, uniform, explore)
        return acted

    return act


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
    learner: Learner[PyTree], envs: DeviceEnvs, axis: SeedAxis, n_eval_envs: int, n_episodes: int
) -> tuple[Callable[[ArrayLike], Evaluation], Callable[[PyTree, Evaluation, jax.Array], tuple[Evaluation, jax.Array]]]:
    """(start, advance) of every seed's deterministic policy for `n_episodes` whole episodes on envs reset
    from the given seeds, spread over the envs as SB3's evaluate_policy spreads them (env i runs
    (n_episodes + i) // n_eval_envs; extra episodes are not counted). Each vector step is the same computation
    however the steps are split into calls, so the results are too. Every seed's envs step until the last seed's
    episodes are counted (the envs step together): a seed's counted episodes are the same either way."""
    targets = jnp.asarray([(n_episodes + i) // n_eval_envs for i in range(n_eval_envs)], jnp.int32)
    first_slot = jnp.asarray(np.concatenate([[0], np.cumsum(np.asarray(targets))[:-1]]), jnp.int32)
    evaluate_action = axis.map(learner.acting.evaluate)
    lead = (axis.n_seeds,) if axis.batched else ()

    def start(seeds: ArrayLike) -> Evaluation:  # a host call (EnvPool's pools reset outside any program)
        def zeros(n: int, dtype: type) -> jax.Array:  # one buffer each: the evaluation is donated
            return jnp.zeros((*lead, n), dtype)

        per_env = zeros(n_eval_envs, jnp.int32), zeros(n_eval_envs, jnp.float32), zeros(n_eval_envs, jnp.int32)
        per_episode = zeros(n_episodes, jnp.float32), zeros(n_episodes, jnp.int32)
        return Evaluation(envs.reset(seeds), *per_env, *per_episode)

    def record(c: Evaluation, out: Reported) -> Evaluation:  # one seed's
        episode_return, length = c.episode_return + out.reward, c.episode_length + out.valid  # a reset step: neither
        ended = out.ended
        counted = ended & (c.counts < targets)
        slot = jnp.where(counted, first_slot + c.counts, n_episodes)  # n_episodes: out of range, dropped
        return Evaluation(
            envs=c.envs,
            counts=c.counts + counted,
            episode_return=jnp.where(ended, 0.0, episode_return),
            episode_length=jnp.where(ended, 0, length),
            returns=c.returns.at[slot].set(episode_return, mode="drop"),
            lengths=c.lengths.at[slot].set(length, mode="drop"),
        )

    def step(states: PyTree, c: Evaluation) -> Evaluation:
        stepped, _, reported = envs.step(c.envs, evaluate_action(states, c.envs.obs))
        recorded: Evaluation = axis.map(record)(c._replace(envs=stepped), reported)
        return recorded

    def advance(states: PyTree, evaluation: Evaluation, max_steps: jax.Array) -> tuple[Evaluation, jax.Array]:
        def running(c: tuple[Evaluation, ArrayLike]) -> jax.Array:
            return (c[0].counts < targets).any() & (c[1] < max_steps)

        evaluation, _ = jax.lax.while_loop(running, lambda c: (step(states, c[0]), c[1] + 1), (evaluation, 0))
        return evaluation, (evaluation.counts >= targets).all()

    return start, advance


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
    """The device loop's compiled programs (its only `jax.jit` sites) and the envs they step."""

    chunk: ChunkFn  # the carry donated
    evaluate: EvalPrograms | None  # None without evaluations
    envs: DeviceEnvs  # the training envs: `reset` starts them from env seeds [(n_seeds,) n_envs] uint32


def compile_device_programs(
    cfg: LearnerConfig,
    learner: Learner[PyTree],
    buffer: UniformBuffer | None,
    axis: SeedAxis,
    envs: DeviceEnvs,
    eval_envs: DeviceEnvs | None,
    shape: RunShape,
    n_eval_envs: int,
    n_eval_episodes: int,
) -> DevicePrograms:
    evaluate = None
    if eval_envs is not None:
        start, advance = make_evaluate(learner, eval_envs, axis, n_eval_envs, n_eval_episodes)
        evaluate = EvalPrograms(start, jax.jit(advance, donate_argnums=1))
    chunk = jax.jit(make_chunk(cfg, learner, buffer, envs, axis, shape), donate_argnums=0)
    return DevicePrograms(chunk=chunk, evaluate=evaluate, envs=envs)
