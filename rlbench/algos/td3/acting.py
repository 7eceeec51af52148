"""How TD3 acts: its deterministic actor, plus action noise while collecting (SB3's `action_noise`).

Normal noise draws std * N(0, 1) per env and action dimension at every step. Ornstein-Uhlenbeck noise
follows SB3's recurrence per env, x <- x + theta (0 - x) dt + std sqrt(dt) N(0, 1), from x = 0 at each
episode start; x is the learner state's `exploration`, so it has the seed axis and is checkpointed.
Before learning_starts the actions are uniform (the noise process starts with the policy; SB3 also adds
noise to those uniform actions, which are clipped to [-1, 1] and as random either way).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from rlbench.algos.common.acting import Acting
from rlbench.algos.td3.config import ActionNoise
from rlbench.algos.td3.state import TD3State


def evaluate(state: TD3State, obs: jax.Array) -> jax.Array:
    action: jax.Array = state.actor.apply_fn(state.actor.variables(), obs)
    return action


def sample(state: TD3State, obs: jax.Array, key: jax.Array) -> tuple[jax.Array, jax.Array]:
    """The actor is deterministic: a 'stochastic' action is its action (as SB3's predict)."""
    return evaluate(state, obs), key


def ornstein_uhlenbeck_step(noise: ActionNoise, previous: jax.Array, white: jax.Array) -> jax.Array:
    """SB3's OrnsteinUhlenbeckActionNoise.__call__ with mean 0: the next noise from `previous` and N(0, 1) draws."""
    return previous - noise.theta * previous * noise.dt + noise.std * jnp.sqrt(noise.dt) * white


def exploration_noise(
    noise: ActionNoise, exploration: jax.Array | None, white: jax.Array, episode_start: jax.Array
) -> tuple[jax.Array, jax.Array | None]:
    """(the noise added to the actions, the next exploration state)."""
    if noise.kind == "normal":
        return noise.std * white, exploration
    assert exploration is not None, "Ornstein-Uhlenbeck noise keeps its state in the learner state (init_state)"
    previous = jnp.where(episode_start[:, None], 0.0, exploration)  # SB3's reset at an episode's end
    following = ornstein_uhlenbeck_step(noise, previous, white)
    return following, following


def policy_part(state: TD3State) -> TD3State:
    """What TD3's acting reads: the actor's parameters and the noise state."""
    actor = state.actor.replace(opt_state=None, target_params=None)
    return state.replace(actor=actor, critic=None, key=None, step=None)


def td3_acting(noise: ActionNoise | None) -> Acting:
    def explore(
        state: TD3State, obs: jax.Array, key: jax.Array, episode_start: jax.Array, progress_remaining: jax.Array
    ) -> tuple[jax.Array, jax.Array | None, jax.Array]:
        action = evaluate(state, obs)
        if noise is None:  # static
            return action, state.exploration, key
        key, draw = jax.random.split(key)
        white = jax.random.normal(draw, action.shape)
        added, exploration = exploration_noise(noise, state.exploration, white, episode_start)
        return jnp.clip(action + added, -1.0, 1.0), exploration, key

    ornstein_uhlenbeck = noise is not None and noise.kind == "ornstein-uhlenbeck"
    return Acting(
        explore=explore,
        sample=sample,
        evaluate=evaluate,
        reads_episode_starts=ornstein_uhlenbeck,
        policy_part=policy_part,
    )
