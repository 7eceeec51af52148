"""How DQN acts: epsilon-greedy on its Q-network while collecting, greedy when evaluated.

The exploration state is the number of vector steps acted (SB3's `_n_calls`), so acting needs no loop-side
warm-up: while fewer than learning_starts env steps were taken every action is uniform (as SB3's warm-up),
then each env's action is uniform with probability epsilon, the schedule's value at the step's
progress_remaining (SB3's exploration_rate after the previous step). Each env draws its own coin; SB3 and SBX
draw one coin for all envs of a vector step, which makes the envs explore together (the same with one env).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from rlbench.algos.common.acting import Acting
from rlbench.algos.dqn.config import DQNConfig
from rlbench.algos.dqn.state import DQNState


def action_values(q: jax.Array) -> jax.Array:
    """[B, n_actions] Q-values, or their mean over QR-DQN's quantiles [B, n_quantiles, n_actions]."""
    return q.mean(axis=-2) if q.ndim == 3 else q


def greedy_index(state: DQNState, obs: jax.Array) -> jax.Array:
    """argmax_a Q(obs, a) [B] int32."""
    q = state.q.apply_fn(state.q.variables(), obs)
    return jnp.argmax(action_values(q), axis=-1).astype(jnp.int32)


def as_action(index: jax.Array) -> jax.Array:
    """Indices [B] as the loop's action column [B, 1] (float32)."""
    return index[:, None].astype(jnp.float32)


def epsilon_greedy(state: DQNState, obs: jax.Array, key: jax.Array, epsilon: jax.Array, n_actions: int) -> jax.Array:
    coin_key, action_key = jax.random.split(key)
    n = obs.shape[0]
    uniform = jax.random.randint(action_key, (n,), 0, n_actions, jnp.int32)
    explores = jax.random.uniform(coin_key, (n,)) < epsilon
    return as_action(jnp.where(explores, uniform, greedy_index(state, obs)))


def policy_part(state: DQNState) -> DQNState:
    """What acting reads: the Q-network's parameters and the vector steps acted."""
    q = state.q.replace(opt_state=None, target_params=None)
    return state.replace(q=q, key=None, step=None, target_updates=None)


def dqn_acting(cfg: DQNConfig, n_actions: int) -> Acting:
    def explore(
        state: DQNState, obs: jax.Array, key: jax.Array, episode_start: jax.Array, progress_remaining: jax.Array
    ) -> tuple[jax.Array, jax.Array, jax.Array]:
        key, draw = jax.random.split(key)
        warming_up = state.exploration * cfg.vector_envs < cfg.learning_starts
        epsilon = jnp.where(warming_up, 1.0, cfg.exploration_schedule(progress_remaining))
        return epsilon_greedy(state, obs, draw, epsilon, n_actions), state.exploration + 1, key

    def sample(state: DQNState, obs: jax.Array, key: jax.Array) -> tuple[jax.Array, jax.Array]:
        """enjoy.py --stochastic: epsilon-greedy at the schedule's final epsilon (SB3's rate after training)."""
        key, draw = jax.random.split(key)
        return epsilon_greedy(state, obs, draw, jnp.float32(cfg.exploration_schedule.final), n_actions), key

    def evaluate(state: DQNState, obs: jax.Array) -> jax.Array:
        return as_action(greedy_index(state, obs))

    return Acting(explore=explore, sample=sample, evaluate=evaluate, random_warmup=False, policy_part=policy_part)
