"""RL Zoo's `normalize` (SB3's VecNormalize) where the device applies it: to observations before the
policy acts, and to each sampled replay batch.

    obs_n = clip((obs - mean) / sqrt(var + epsilon), -clip_obs, clip_obs)
    reward_n = clip(reward / sqrt(var(R) + epsilon), -clip_reward, clip_reward)

with the running mean and variance of the observations and of the discounted return R, kept on the host
(rlbench.envs.obs_normalizer). As SB3's off-policy algorithms, the replay buffer holds the original
observations and rewards, and a sampled batch is scaled with the statistics current when it is sampled,
not those of when it was collected.
"""

from __future__ import annotations

from dataclasses import dataclass

import jax
import jax.numpy as jnp
from flax import struct

from rlbench.types import Transition


@dataclass(frozen=True, kw_only=True)
class NormalizeConfig:
    """VecNormalize's arguments, with SB3's defaults (RL Zoo's `normalize: true`)."""

    norm_obs: bool = True
    norm_reward: bool = True
    clip_obs: float = 10.0
    clip_reward: float = 10.0
    gamma: float = 0.99  # discount of the return R whose variance scales the rewards
    epsilon: float = 1e-8


class Normalization(struct.PyTreeNode):
    """The statistics as the device uses them (float32); a None field leaves its quantity unchanged.

    obs_std and reward_std are sqrt(var + epsilon), computed on the host from the float64 statistics.
    Leading seed axis in a run of several seeds, as every learner array.
    """

    obs_mean: jax.Array | None  # [obs_dim]
    obs_std: jax.Array | None  # [obs_dim]
    reward_std: jax.Array | None  # []
    clip_obs: float = struct.field(pytree_node=False)
    clip_reward: float = struct.field(pytree_node=False)


def normalize_obs(obs: jax.Array, normalization: Normalization | None) -> jax.Array:
    """[..., obs_dim] observations as the policy and the critics see them."""
    if normalization is None or normalization.obs_mean is None:
        return obs
    assert normalization.obs_std is not None, "obs_mean and obs_std are set together"
    clip = normalization.clip_obs
    return jnp.clip((obs - normalization.obs_mean) / normalization.obs_std, -clip, clip)


def normalize_reward(reward: jax.Array, normalization: Normalization | None) -> jax.Array:
    if normalization is None or normalization.reward_std is None:
        return reward
    clip = normalization.clip_reward
    return jnp.clip(reward / normalization.reward_std, -clip, clip)


def normalize_batch(batch: Transition, normalization: Normalization | None) -> Transition:
    """A sampled batch of original transitions, scaled with the current statistics."""
    if normalization is None:
        return batch
    return batch._replace(
        obs=normalize_obs(batch.obs, normalization),
        next_obs=normalize_obs(batch.next_obs, normalization),
        reward=normalize_reward(batch.reward, normalization),
    )
