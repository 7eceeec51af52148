"""DQN's and QR-DQN's training iteration: replay batches (algos/common/fused.py's sampling) through a scan of
Q-network steps, after the target updates that fell due while the iteration's transitions were collected.

DQN's step: y = r + gamma (1 - terminated) max_a' Q_target(s', a'), Huber loss (delta 1, SB3's smooth L1) of
Q(s, a) against y, Adam after clipping the gradient's norm. QR-DQN's: the target quantiles of the action
greedy under the target's mean, y_j = r + gamma (1 - terminated) z_target_j(s', a*), and the quantile Huber
loss summed over the quantiles and averaged over samples and target atoms (SB3-contrib's sum_over_quantiles).
Only `terminated` stops the bootstrap: a time-limit truncation is not the end of the MDP.

Target updates: SB3 updates the target after every max(target_update_interval // n_envs, 1)-th vector step,
while collecting. The Q-network changes only in training, so the updates that fell due since the last
iteration are applied at its start, before its gradient steps: the same parameters as SB3's order.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import optax

from rlbench.algos.common.footprint import ACTIVATION_VALUES_PER_UNIT, FLOAT_BYTES
from rlbench.algos.common.fused import (
    GradientStepsFn,
    StepInputs,
    make_train,
    make_update,
    scan_gradient_steps,
    steps_per_update,
)
from rlbench.algos.common.learner import Learner, replay_collection, replay_storage
from rlbench.algos.common.quantiles import quantile_huber_loss
from rlbench.algos.common.steps import apply_loss, polyak, set_learning_rate
from rlbench.algos.dqn.acting import dqn_acting
from rlbench.algos.dqn.config import DQNConfig
from rlbench.algos.dqn.state import DQNState, init_state
from rlbench.buffers.uniform import bytes_per_transition, make_uniform_buffer
from rlbench.errors import ConfigError
from rlbench.networks.action_values import ActionValues
from rlbench.networks.nature_cnn import features_units
from rlbench.networks.trunk import trunk_units
from rlbench.types import EnvSpec, Metrics, Params, Transition

STEP_METRICS = ("train/loss", "train/q_mean")
ITERATION_METRICS = ("train/learning_rate", "train/n_updates", "rollout/exploration_rate")


def dqn_target(next_q: jax.Array, reward: jax.Array, terminated: jax.Array, gamma: float) -> jax.Array:
    """y = r + gamma (1 - terminated) max_a' Q_target(s', a'); next_q [B, n_actions] -> [B]."""
    return jax.lax.stop_gradient(reward + gamma * (1.0 - terminated) * next_q.max(axis=-1))


def quantile_target(next_z: jax.Array, reward: jax.Array, terminated: jax.Array, gamma: float) -> jax.Array:
    """y_j = r + gamma (1 - terminated) z_j(s', a*), a* = argmax_a mean_j z_j(s', a); next_z [B, N, n_actions]."""
    greedy = next_z.mean(axis=1).argmax(axis=-1)  # [B]
    chosen = jnp.take_along_axis(next_z, greedy[:, None, None], axis=2)[..., 0]  # [B, N]
    return jax.lax.stop_gradient(reward[:, None] + gamma * (1.0 - terminated[:, None]) * chosen)


def q_loss(q: jax.Array, action: jax.Array, target: jax.Array) -> tuple[jax.Array, jax.Array]:
    """(DQN's Huber loss, mean Q) of Q(s, a) [B] taken from q [B, n_actions] against the target [B]."""
    q_taken = jnp.take_along_axis(q, action[:, None], axis=1)[:, 0]
    return optax.huber_loss(q_taken, target).mean(), q_taken.mean()


def quantile_loss(z: jax.Array, action: jax.Array, target: jax.Array) -> tuple[jax.Array, jax.Array]:
    """(QR-DQN's quantile Huber loss summed over quantiles, mean quantile) of the taken action's quantiles."""
    z_taken = jnp.take_along_axis(z, action[:, None, None], axis=2)[..., 0]  # [B, N]
    return z_taken.shape[-1] * quantile_huber_loss(z_taken[None], target), z_taken.mean()


def q_step(cfg: DQNConfig, state: DQNState, batch: Transition, key: jax.Array) -> tuple[DQNState, Metrics]:
    """One gradient step of the Q-network on a batch (`key` unused: the update draws nothing)."""
    next_q = state.q.apply_fn(state.q.variables(state.q.target_params), batch.next_obs)
    distributional = cfg.n_quantiles is not None
    target = (quantile_target if distributional else dqn_target)(next_q, batch.reward, batch.terminated, cfg.gamma)
    action = batch.action[:, 0].astype(jnp.int32)
    loss_of = quantile_loss if distributional else q_loss

    def loss_fn(params: Params) -> tuple[jax.Array, jax.Array]:
        return loss_of(state.q.apply_training(params, batch.obs), action, target)

    q, loss, q_mean = apply_loss(state.q, loss_fn)
    return state.replace(q=q), {"train/loss": loss, "train/q_mean": q_mean}


def with_due_target_updates(cfg: DQNConfig, state: DQNState) -> DQNState:
    """The target moved towards the Q-network once for every update due by the vector steps acted (tau 1: one
    copy however many fell due)."""
    due = state.exploration // cfg.target_interval_vector_steps
    missed = due - state.target_updates
    online, target = state.q.params, state.q.target_params
    if cfg.tau == 1.0:  # static: a copy
        moved = jax.tree.map(lambda o, t: jnp.where(missed > 0, o, t), online, target)
    else:
        moved = jax.lax.fori_loop(0, missed, lambda _, t: polyak(t, online, cfg.tau), target)
    return state.replace(q=state.q.replace(target_params=moved), target_updates=jnp.maximum(due, state.target_updates))


def make_gradient_steps(cfg: DQNConfig) -> GradientStepsFn[DQNState]:
    def gradient_step(state: DQNState, step_batch_and_key: StepInputs) -> tuple[DQNState, Metrics]:
        _, batch, key = step_batch_and_key
        state, metrics = q_step(cfg, state, batch, key)
        return state.replace(step=state.step + 1), metrics

    def gradient_steps(
        state: DQNState,
        batches: Transition,
        keys: jax.Array,
        progress_remaining: jax.Array,
        first_step: jax.Array,
        n_steps: jax.Array | None = None,
    ) -> tuple[DQNState, Metrics]:
        learning_rate = cfg.learning_rate(progress_remaining)
        state = with_due_target_updates(cfg, state.replace(q=set_learning_rate(state.q, learning_rate)))
        state, metrics = scan_gradient_steps(gradient_step, state, batches, keys, first_step, n_steps)
        metrics["train/learning_rate"] = learning_rate
        metrics["train/n_updates"] = state.step
        metrics["rollout/exploration_rate"] = cfg.exploration_schedule(progress_remaining)  # the next step's epsilon
        return state, metrics

    return gradient_steps


def activation_bytes(cfg: DQNConfig, spec: EnvSpec) -> int:
    """An upper estimate of one iteration's temporaries: the sampled batches and one step's activations (the
    Q-network's pass on obs and the target's on next_obs)."""
    batches = steps_per_update(cfg) * cfg.batch_size * bytes_per_transition(spec)
    outputs = spec.n_actions * (cfg.n_quantiles or 1)
    units = features_units(cfg.features, spec.image_shape) + trunk_units(cfg.q_network) + outputs
    per_step = 2 * cfg.batch_size * units * ACTIVATION_VALUES_PER_UNIT
    return batches + per_step * FLOAT_BYTES


def make_learner(cfg: DQNConfig, spec: EnvSpec) -> Learner[DQNState]:
    """Bind DQN's (or QR-DQN's) pure functions to a config and a Discrete env's spec."""
    if (refusal := cfg.features.refusal(spec.image_shape, spec.obs_dim)) is not None:
        raise ConfigError(refusal)
    network = ActionValues(cfg.q_network, spec.n_actions, cfg.n_quantiles, cfg.features, spec.image_shape)
    buffer = make_uniform_buffer(cfg.buffer_size, spec)
    gradient_steps = make_gradient_steps(cfg)
    return Learner(
        init_fn=lambda key: init_state(cfg, spec, network, key),
        update_fn=make_update(cfg, buffer, gradient_steps),
        storage=replay_storage(buffer),
        collection=replay_collection(cfg),
        train_fn=make_train(cfg, buffer, gradient_steps),
        gradient_steps_fn=gradient_steps,
        critic_step_fn=lambda state, batch, key: q_step(cfg, state, batch, key),
        metric_names=(*STEP_METRICS, *ITERATION_METRICS),
        acting=dqn_acting(cfg, spec.n_actions),
        parameters=lambda state: state.q.params,
        activation_bytes=activation_bytes(cfg, spec),
    )
