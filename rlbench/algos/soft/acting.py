"""How the SAC family acts (SAC, DroQ, TQC, CrossQ): with its actor (a NetworkState) in evaluation mode.

So a policy loaded from a checkpoint acts without a replay buffer or an optimizer step: a tanh-squashed
Gaussian sample for collection, its mode for evaluation.
With gSDE the collection noise comes from the exploration matrices the state holds (one per env),
which the host resamples on gSDE's schedule (`resample_due`).
"""

from __future__ import annotations

from typing import Protocol, Self, TypeVar, overload

import jax
from flax import struct

from rlbench.algos.common.acting import Acting
from rlbench.algos.common.train_state import NetworkState
from rlbench.networks.actor import GSDEConfig


class Exploration(struct.PyTreeNode):
    """gSDE's held exploration matrices [n_envs, latent_dim, action_dim] and the key of their next draw."""

    matrices: jax.Array
    key: jax.Array


class SoftPolicyState(Protocol):
    """What the SAC family's acting reads of its learner state (SACState, CrossQState)."""

    @property
    def actor(self) -> NetworkState: ...

    @property
    def exploration(self) -> Exploration | None: ...

    def replace(self, **overrides: object) -> Self: ...


P = TypeVar("P", bound=SoftPolicyState)


def draw_exploration(actor: NetworkState, key: jax.Array, n_envs: int) -> Exploration:
    """Fresh matrices from the actor's current exploration std, and the key after the draw."""
    key, draw = jax.random.split(key)
    std = actor.apply_fn(actor.variables(), method="exploration_std")
    return Exploration(std * jax.random.normal(draw, (n_envs, *std.shape), std.dtype), key)


def resample_exploration(state: P) -> P:
    """The state with new exploration matrices (gSDE), drawn from the actor's std as it is now."""
    exploration = state.exploration
    assert exploration is not None, "gSDE's exploration matrices are resampled only with gSDE (soft_acting)"
    return state.replace(exploration=draw_exploration(state.actor, exploration.key, exploration.matrices.shape[0]))


@overload
def resample_due(vector_steps_in_rollout: int, sample_freq: int) -> bool: ...


@overload
def resample_due(vector_steps_in_rollout: jax.Array, sample_freq: int) -> jax.Array: ...


def resample_due(vector_steps_in_rollout: int | jax.Array, sample_freq: int) -> bool | jax.Array:
    """SB3's schedule: at the start of every rollout (the train_freq vector steps between two training
    iterations) and, with sde_sample_freq > 0, every sde_sample_freq vector steps into it. A Python int gives
    a bool (the host loop), a traced int32 a traced bool (the device loop's scan)."""
    n = vector_steps_in_rollout
    return (n == 0) | (sample_freq > 0 and n % sample_freq == 0)


def sample(state: SoftPolicyState, obs: jax.Array, key: jax.Array) -> tuple[jax.Array, jax.Array]:
    """(a ~ pi(.|obs) in [-1, 1], the next key) with fresh noise: a plain SAC sample, or under gSDE one new
    exploration matrix for the batch (enjoy.py --stochastic)."""
    key, action_key = jax.random.split(key)
    return state.actor.apply_fn(state.actor.variables(), obs).sample(action_key)[0], key


def act(state: SoftPolicyState, obs: jax.Array, key: jax.Array) -> tuple[jax.Array, jax.Array]:
    """(the action for collecting experience, the next key); obs [n_envs, obs_dim]."""
    if state.exploration is None:
        return sample(state, obs, key)
    key, _ = jax.random.split(key)  # the same key stream as without gSDE
    return state.actor.apply_fn(state.actor.variables(), obs).explore(state.exploration.matrices), key


def act_deterministic(state: SoftPolicyState, obs: jax.Array) -> jax.Array:
    """tanh of the Gaussian mean, for evaluation."""
    action: jax.Array = state.actor.apply_fn(state.actor.variables(), obs).mode()
    return action


def explore(
    state: SoftPolicyState, obs: jax.Array, key: jax.Array, episode_start: jax.Array, progress_remaining: jax.Array
) -> tuple[jax.Array, Exploration | None, jax.Array]:
    """`act`, with the exploration state as the Acting interface returns it (gSDE's matrices do not change
    at episode starts: they are redrawn on their own schedule)."""
    action, key = act(state, obs, key)
    return action, state.exploration, key


def policy_part(state: P) -> P:
    """What the SAC family's acting reads: the actor's parameters (CrossQ's with its statistics) and gSDE's
    matrices."""
    actor = state.actor.replace(opt_state=None)
    return state.replace(actor=actor, critic=None, temperature=None, key=None, step=None)


def soft_acting(gsde: GSDEConfig | None) -> Acting:
    """The SAC family's acting, with gSDE's schedule when `gsde` is set."""
    if gsde is None:
        return Acting(explore=explore, sample=sample, evaluate=act_deterministic, policy_part=policy_part)
    return Acting(
        explore=explore,
        sample=sample,
        evaluate=act_deterministic,
        policy_part=policy_part,
        random_warmup=not gsde.at_warmup,
        resample_due=lambda vector_steps_in_rollout: resample_due(vector_steps_in_rollout, gsde.sample_freq),
        resample=resample_exploration,
    )
