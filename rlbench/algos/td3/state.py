"""TD3's training state: a deterministic tanh actor (rlbench.networks.actor) and a critic ensemble, each with
its Polyak-averaged target, and the Ornstein-Uhlenbeck noise of every env (the exploration state)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import struct

from rlbench.algos.common.steps import make_adam
from rlbench.algos.common.train_state import NetworkState, TargetCriticState
from rlbench.algos.td3.config import TD3Config
from rlbench.networks.actor import DeterministicActor
from rlbench.networks.critic import CriticEnsemble
from rlbench.types import EnvSpec, Params


class TargetActorState(NetworkState):
    """The actor and its Polyak-averaged copy, which chooses the TD target's next action."""

    target_params: Params


class TD3State(struct.PyTreeNode):
    actor: TargetActorState
    critic: TargetCriticState
    key: jax.Array  # typed PRNG key for sampling batches, target smoothing noise and dropout masks
    step: jax.Array  # int32 gradient steps done
    exploration: jax.Array | None = None  # Ornstein-Uhlenbeck noise [n_envs, action_dim]; None otherwise


def init_state(
    cfg: TD3Config, spec: EnvSpec, actor: DeterministicActor, critic: CriticEnsemble, key: jax.Array
) -> TD3State:
    """Fresh networks, each target a copy of its network (a separate one: shared buffers break donation)."""
    key, actor_key, critic_key = jax.random.split(key, 3)
    obs = jnp.zeros((1, spec.obs_dim), jnp.float32)
    actor_params = actor.init(actor_key, obs)["params"]
    critic_params = critic.init(critic_key, obs, jnp.zeros((1, spec.action_dim), jnp.float32))["params"]
    noise = cfg.action_noise
    exploration = None
    if noise is not None and noise.kind == "ornstein-uhlenbeck":
        exploration = jnp.zeros((noise.n_envs, spec.action_dim), jnp.float32)
    return TD3State(
        actor=TargetActorState.for_network(
            cfg.actor,
            actor.apply,
            actor_params,
            make_adam(cfg.learning_rate, cfg.adam_b1, cfg.weight_decay),
            target_params=jax.tree.map(jnp.copy, actor_params),
        ),
        critic=TargetCriticState.for_network(
            cfg.critic,
            critic.apply,
            critic_params,
            make_adam(cfg.critic_learning_rate, cfg.adam_b1, cfg.weight_decay),
            target_params=jax.tree.map(jnp.copy, critic_params),
        ),
        key=key,
        step=jnp.zeros((), jnp.int32),
        exploration=exploration,
    )
