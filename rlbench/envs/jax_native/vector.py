"""A batch of JAX-native envs stepped as the host loop's vector envs are: the one place where actions are
rescaled from [-1, 1] to the env's bounds, the time limit truncates, and an ended episode restarts.

The semantics are the host loop's (gymnasium's SAME_STEP autoreset): the step that ends an episode returns
the true last observation as `final_obs` (a time limit bootstraps from it) and the next episode's first
observation as `next_obs`, which the envs continue from. Each env owns a key chain that starts at
`jax.random.key(seed)`, as gymnasium's `env.reset(seed=seed)`: every step splits it into the chain's next
key, the step's key and a reset key, so an env's trajectory depends on its seed and actions only (not on
how many envs or seeds run beside it).

Everything here is pure and vmapped over a leading env axis: it runs under jit, inside lax.scan, and under
an outer jax.vmap over seeds.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from rlbench.envs.jax_native.env import JaxEnv
from rlbench.types import PyTree


class EnvCarry(NamedTuple):
    """What a batch of envs carries from one step to the next; every field has a leading env axis."""

    state: PyTree  # the env's own state
    obs: jax.Array  # [n, obs_dim] float32: what the policy acts on next
    key: jax.Array  # [n] typed keys: each env's key chain
    elapsed: jax.Array  # [n] int32: steps into the current episode


class EnvStep(NamedTuple):
    """One step of a batch of envs; every field has a leading env axis."""

    next_obs: jax.Array  # the obs each env continues from: a new episode's first after an end
    final_obs: jax.Array  # the obs the transition ends in: the true last obs on an end, else == next_obs
    reward: jax.Array  # float32
    terminated: jax.Array  # bool: a terminal state (no bootstrap)
    truncated: jax.Array  # bool: the time limit, and not terminated (bootstrap from final_obs)


class Reported(NamedTuple):
    """What one step of a batch of envs adds to the episodes the Monitor files, logs and evaluations count
    (every field [n]): an env's own episodes (its reward; its episode's end), or, for Atari games with episodic
    life (rlbench.envs.envpool_xla), each whole game (its raw reward; game over), as rlbench.envs.reported counts
    them on the host loop."""

    valid: jax.Array  # bool: the step was a transition (an EnvPool reset step is not: it counts nowhere)
    reward: jax.Array  # float32
    ended: jax.Array  # bool: the counted episode ended on this step


def reported_episodes(step: EnvStep) -> Reported:
    """The envs' own episodes, every step a transition."""
    return Reported(jnp.ones_like(step.terminated), step.reward, step.terminated | step.truncated)


def reset_envs(env: JaxEnv, seeds: jax.Array) -> EnvCarry:
    """Start one env per seed (int32 or uint32 [n]); env i's key chain starts at jax.random.key(seeds[i]).
    Seeds are read as uint32, so every seed rlbench takes (up to 2**32 - 1, as SB3) keys as the Python int."""
    keys = jax.vmap(jax.random.key)(jnp.asarray(seeds).astype(jnp.uint32))
    return jax.vmap(lambda key: _reset_one(env, key))(keys)


def restart_envs(env: JaxEnv, carry: EnvCarry) -> EnvCarry:
    """Start a new episode in every env from its own key chain (gymnasium's `env.reset()` without a seed)."""
    return jax.vmap(lambda key: _reset_one(env, key))(carry.key)


def step_envs(env: JaxEnv, carry: EnvCarry, actions: jax.Array) -> tuple[EnvCarry, EnvStep]:
    """Step every env with actions [n, action_dim] in [-1, 1] (clipped there, then rescaled to the bounds), or
    a Discrete env's action indices [n, 1]."""
    return step_envs_in_bounds(env, carry, unit_to_bounds(env, actions))


def step_envs_in_bounds(env: JaxEnv, carry: EnvCarry, actions: jax.Array) -> tuple[EnvCarry, EnvStep]:
    """`step_envs` with actions already in the env's bounds (JaxGymEnv: gymnasium's RescaleAction did it)."""
    return jax.vmap(lambda one, action: _step_one(env, one, action))(carry, jnp.asarray(actions, jnp.float32))


def unit_to_bounds(env: JaxEnv, actions: jax.Array) -> jax.Array:
    """[-1, 1] -> [low, high] in float32, as gymnasium's RescaleAction computes it; a Discrete env's index as
    it is (the host loop passes it unscaled too: rlbench.envs.discrete)."""
    if env.spec.discrete:
        return jnp.asarray(actions, jnp.float32)
    low = jnp.asarray(env.action_low, jnp.float32)
    high = jnp.asarray(env.action_high, jnp.float32)
    unit = jnp.clip(jnp.asarray(actions, jnp.float32), -1.0, 1.0)
    return low + (unit + 1.0) / 2.0 * (high - low)


def _reset_one(env: JaxEnv, key: jax.Array) -> EnvCarry:
    key, reset_key = jax.random.split(key)
    state, obs = env.reset(reset_key)
    return EnvCarry(state, jnp.asarray(obs, jnp.float32), key, jnp.zeros((), jnp.int32))


def _step_one(env: JaxEnv, carry: EnvCarry, action: jax.Array) -> tuple[EnvCarry, EnvStep]:
    key, step_key, reset_key = jax.random.split(carry.key, 3)
    state, obs, reward, terminated = env.step(carry.state, action, step_key)
    obs = jnp.asarray(obs, jnp.float32)
    terminated = jnp.asarray(terminated, jnp.bool_)
    elapsed = carry.elapsed + 1
    truncated = (elapsed >= env.max_episode_steps) & ~terminated
    ended = terminated | truncated
    # Both branches are computed (a vmapped cond is a select anyway); the reset state replaces the stepped one.
    reset_state, reset_obs = env.reset(reset_key)
    state = jax.tree.map(lambda fresh, stepped: jnp.where(ended, fresh, stepped), reset_state, state)
    next_obs = jnp.where(ended, jnp.asarray(reset_obs, jnp.float32), obs)
    elapsed = jnp.where(ended, 0, elapsed).astype(jnp.int32)
    reward = jnp.asarray(reward, jnp.float32)
    return EnvCarry(state, next_obs, key, elapsed), EnvStep(next_obs, obs, reward, terminated, truncated)
