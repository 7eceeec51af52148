"""PPO's update on one rollout as one pure function, to be jitted once: GAE (a reverse scan), then
`n_epochs` epochs, each a fresh permutation of the rollout cut into minibatches, the minibatch gradient
steps fused with nested `lax.scan`s (epochs outside, minibatches inside), as PureJaxRL's shape with named
carries.

target_kl, as SB3: before each minibatch's gradient step its approx_kl is computed; once it exceeds
1.5 * target_kl that step is not taken, nor any later one of this update. The scans keep their length
(one compiled call): a carried flag `going` turns the remaining minibatches into skips under `lax.cond`.
Metrics are SB3's: the losses averaged over the minibatches whose loss was computed (the stopping one
included, as SB3 logs it), approx_kl averaged over the last epoch that ran, train/loss the last loss.
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp
from flax import struct
from flax.training.train_state import TrainState

from rlbench.algos.common.steps import apply_gradients, fuse_steps, set_learning_rate
from rlbench.algos.ppo.config import PPOConfig, minibatch_size
from rlbench.algos.ppo.gae import generalized_advantages
from rlbench.algos.ppo.losses import LossSettings, Minibatch, explained_variance, ppo_loss
from rlbench.algos.ppo.state import PPOState
from rlbench.buffers.rollout import RolloutState, flatten_env_major
from rlbench.types import Metrics, Params

LOSS_METRICS = (
    "train/policy_gradient_loss",
    "train/value_loss",
    "train/entropy_loss",
    "train/loss",
    "train/approx_kl",
    "train/clip_fraction",
)


class StepCarry(struct.PyTreeNode):
    policy: TrainState
    going: jax.Array  # bool: no minibatch of this update has exceeded the KL limit yet
    steps_taken: jax.Array  # int32


def minibatch_step(
    cfg: PPOConfig, settings: LossSettings, carry: StepCarry, batch: Minibatch
) -> tuple[StepCarry, tuple[Metrics, jax.Array]]:
    """One minibatch: its loss, and its gradient step unless the KL limit stops the update here.
    Returns the carry and (metrics, ran): `ran` is whether the loss was computed (metrics NaN if not)."""

    def compute(carry: StepCarry) -> tuple[StepCarry, tuple[Metrics, jax.Array]]:
        grad_fn = jax.value_and_grad(ppo_loss, has_aux=True)
        (_, metrics), grads = grad_fn(carry.policy.params, carry.policy.apply_fn, batch, settings)
        if cfg.target_kl is None:
            within_kl = jnp.array(True)
            policy = apply_gradients(carry.policy, grads)
        else:
            # SB3 stops on approx_kl > 1.5 * target_kl; a NaN approx_kl does not stop it either.
            within_kl = jnp.logical_not(metrics["train/approx_kl"] > 1.5 * cfg.target_kl)
            policy = jax.lax.cond(within_kl, lambda p: p.apply_gradients(grads=grads), lambda p: p, carry.policy)
        steps_taken = carry.steps_taken + within_kl.astype(jnp.int32)
        return StepCarry(policy=policy, going=within_kl, steps_taken=steps_taken), (metrics, jnp.array(True))

    def skip(carry: StepCarry) -> tuple[StepCarry, tuple[Metrics, jax.Array]]:
        return carry, ({name: jnp.full((), jnp.nan) for name in LOSS_METRICS}, jnp.array(False))

    if cfg.target_kl is None:  # static: nothing can stop the update, no branch at all
        return compute(carry)
    stepped: tuple[StepCarry, tuple[Metrics, jax.Array]] = jax.lax.cond(carry.going, compute, skip, carry)
    return stepped


def epoch_minibatches(
    flat: Minibatch, key: jax.Array | None, n_minibatches: int, batch_size: int | None = None
) -> Minibatch:
    """[N, ...] samples -> [n_minibatches, B, ...] in the order of a fresh permutation (`key`), or in rollout
    order when `key` is None (one full-batch minibatch: the order changes nothing). B is N / n_minibatches, or
    `batch_size` when it does not divide N: the last minibatch then holds the N mod B samples left (SB3's)
    and padding, weighted 0 (Minibatch.weight)."""
    n = flat.advantage.shape[0]
    if key is not None:
        permutation = jax.random.permutation(key, n)
        flat = jax.tree.map(lambda x: x[permutation], flat)
    if batch_size is None or n_minibatches * batch_size == n:
        return fuse_steps(flat, n_minibatches)
    padding = n_minibatches * batch_size - n
    padded: Minibatch = jax.tree.map(lambda x: jnp.concatenate([x, jnp.zeros((padding, *x.shape[1:]), x.dtype)]), flat)
    weight = (jnp.arange(n + padding) < n).astype(jnp.float32)
    return fuse_steps(padded._replace(weight=weight), n_minibatches)


def epoch_keys(key: jax.Array, n_epochs: int) -> tuple[jax.Array, jax.Array]:
    """The state's next key and one permutation key per epoch [n_epochs]."""
    key, epochs_key = jax.random.split(key)
    return key, jax.random.split(epochs_key, n_epochs)


def rollout_samples(cfg: PPOConfig, policy: TrainState, rollout: RolloutState) -> Minibatch:
    """The rollout with its GAE advantages and returns, flattened env-major to [n_steps * n_envs, ...]."""
    _, last_value = policy.apply_fn({"params": policy.params}, rollout.last_obs)
    targets = generalized_advantages(rollout.steps, last_value, cfg.gamma, cfg.gae_lambda)
    steps = rollout.steps
    samples = Minibatch(steps.obs, steps.action, steps.value, steps.log_prob, targets.advantages, targets.returns)
    return flatten_env_major(samples)


def loss_settings(cfg: PPOConfig, progress_remaining: jax.Array) -> LossSettings:
    clip_range_vf = None if cfg.clip_range_vf is None else cfg.clip_range_vf(progress_remaining)
    return LossSettings(
        clip_range=cfg.clip_range(progress_remaining),
        clip_range_vf=clip_range_vf,
        ent_coef=cfg.ent_coef,
        vf_coef=cfg.vf_coef,
        normalize_advantage=cfg.normalize_advantage,
    )


def make_update(cfg: PPOConfig, n_envs: int) -> Callable[[PPOState, RolloutState, jax.Array], tuple[PPOState, Metrics]]:
    """update(state, rollout, progress_remaining) -> (state, metrics) for rollouts of cfg.n_steps x n_envs."""
    rollout_size = cfg.n_steps * n_envs
    batch_size = minibatch_size(cfg, rollout_size)
    n_minibatches = -(-rollout_size // batch_size)  # a last, smaller minibatch when batch_size does not divide
    shuffles = cfg.batch_size is not None and n_minibatches > 1

    def update(state: PPOState, rollout: RolloutState, progress_remaining: jax.Array) -> tuple[PPOState, Metrics]:
        learning_rate = cfg.learning_rate(progress_remaining)
        policy = set_learning_rate(state.policy, learning_rate)
        flat = rollout_samples(cfg, policy, rollout)
        settings = loss_settings(cfg, progress_remaining)
        key, keys = epoch_keys(state.key, cfg.n_epochs)

        def epoch(carry: StepCarry, epoch_key: jax.Array) -> tuple[StepCarry, tuple[Metrics, jax.Array]]:
            minibatches = epoch_minibatches(flat, epoch_key if shuffles else None, n_minibatches, batch_size)
            return jax.lax.scan(lambda c, b: minibatch_step(cfg, settings, c, b), carry, minibatches)

        start = StepCarry(policy=policy, going=jnp.array(True), steps_taken=jnp.zeros((), jnp.int32))
        end, (metrics, ran) = jax.lax.scan(epoch, start, keys)
        state = state.replace(
            policy=end.policy,
            key=key,
            step=state.step + end.steps_taken,
            n_updates=state.n_updates + ran[:, 0].sum(dtype=jnp.int32),  # SB3 counts every epoch it enters
        )
        summary = summarize(metrics, ran) | schedule_metrics(settings, learning_rate, state)
        summary["train/explained_variance"] = explained_variance(flat.old_value, flat.returns)
        return state, summary

    return update


def summarize(metrics: Metrics, ran: jax.Array) -> Metrics:
    """SB3's log of one update from the [n_epochs, n_minibatches] metrics of the minibatches that `ran`."""
    summary = {name: jnp.nanmean(value) for name, value in metrics.items()}
    last_epoch = jnp.maximum(ran[:, 0].sum() - 1, 0)
    summary["train/approx_kl"] = jnp.nanmean(metrics["train/approx_kl"][last_epoch])
    summary["train/loss"] = metrics["train/loss"].reshape(-1)[jnp.maximum(ran.sum() - 1, 0)]
    return summary


def schedule_metrics(settings: LossSettings, learning_rate: jax.Array, state: PPOState) -> Metrics:
    metrics: Metrics = {
        "train/learning_rate": learning_rate,
        "train/clip_range": settings.clip_range,
        "train/n_updates": state.n_updates,
    }
    if settings.clip_range_vf is not None:
        metrics["train/clip_range_vf"] = settings.clip_range_vf
    params: Params = state.policy.params
    log_std = params.get("log_std")
    if log_std is not None:
        metrics["train/std"] = jnp.exp(log_std).mean()
    return metrics
