"""A batch of JAX-native envs stepped as the host loop's vector envs are: the one place where actions are
rescaled from [-1, 1] to the env's bounds, the time limit truncates, and an ended episode restarts.

The semantics are the host loop's (gymnasium's SAME_STEP autoreset): the step that ends an episode returns
the true last observation as `final_obs` (a time limit bootstraps from it) and the next episode's first
observation as `next_obs`, which the envs continue from. Each env owns a key chain that starts at
`jax.random.key(seed)`, as gymnasium's `env.reset(seed=seed)`: the first reset splits it into the chain's next
key, the first episode's reset key and the second's; every step splits it into the chain's next key, the
step's key and a start key, which an episode that starts on that step keeps for the start of the one after
it (NextStart: starts are computed ahead of the ends). So an env's trajectory depends on its seed and actions
only (not on how many envs or seeds run beside it, nor on when its starts were computed).

Everything here is pure and vmapped over the leading env axes (an env axis, or seeds then envs): it runs under
jit, inside lax.scan, and under an outer jax.vmap.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, NamedTuple, cast

import jax
import jax.numpy as jnp

from rlbench.envs.jax_native.env import JaxEnv
from rlbench.types import PyTree


class NextStart(NamedTuple):
    """Each env's next episode's first state, computed ahead of the end it follows: a restart selects it, where
    running the env's reset inside every step for the envs that end cost a physics env about a tenth of its
    step on XLA:CPU (benchmarks/README.md). Its key is drawn when the episode before it starts, so the state is
    reset(key) whenever it is computed: for every env whose is not ready, in a step where some env ends without
    it ready (rare: an env that ends twice within the envs' shortest episodes since the last computation)."""

    state: PyTree  # the env's own state, as reset(key) returns it once ready
    obs: jax.Array  # [n, obs_dim] float32
    key: jax.Array  # [n] typed keys
    ready: jax.Array  # [n] bool: state and obs are reset(key)'s


class EnvCarry(NamedTuple):
    """What a batch of envs carries from one step to the next; every field has a leading env axis."""

    state: PyTree  # the env's own state
    obs: jax.Array  # [n, obs_dim] float32: what the policy acts on next
    key: jax.Array  # [n] typed keys: each env's key chain
    elapsed: jax.Array  # [n] int32: steps into the current episode
    next_start: NextStart | None = None  # None for EnvPool's pools, which restart their envs themselves


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
    """Start one env per seed (int32 or uint32 [(n_seeds,) n]); env i's key chain starts at jax.random.key(seeds[i]).
    Seeds are read as uint32, so every seed rlbench takes (up to 2**32 - 1, as SB3) keys as the Python int."""
    seeds = jnp.asarray(seeds).astype(jnp.uint32)
    return _over_envs(seeds.ndim, lambda seed: _reset_one(env, jax.random.key(seed)))(seeds)


def restart_envs(env: JaxEnv, carry: EnvCarry) -> EnvCarry:
    """Start a new episode in every env, as an end does (gymnasium's `env.reset()` without a seed)."""
    over_envs = functools.partial(_over_envs, carry.elapsed.ndim)
    chain, start_key = over_envs(lambda key: tuple(jax.random.split(key)))(carry.key)
    every = jnp.ones_like(carry.elapsed, jnp.bool_)
    start = _ready_for(env, _next_start(carry), every)
    return _restarted(every, carry._replace(key=chain), start, start_key)


def step_envs(env: JaxEnv, carry: EnvCarry, actions: jax.Array) -> tuple[EnvCarry, EnvStep]:
    """Step every env with actions [(n_seeds,) n, action_dim] in [-1, 1] (clipped there, then rescaled to the
    bounds), or a Discrete env's action indices [(n_seeds,) n, 1]."""
    return step_envs_in_bounds(env, carry, unit_to_bounds(env, actions))


def step_envs_in_bounds(env: JaxEnv, carry: EnvCarry, actions: jax.Array) -> tuple[EnvCarry, EnvStep]:
    """`step_envs` with actions already in the env's bounds (JaxGymEnv: gymnasium's RescaleAction did it). The
    envs may carry a seed axis before the env axis: whether next starts are computed is asked once for all."""
    over_envs = functools.partial(_over_envs, carry.elapsed.ndim)
    stepped, step, start_key = over_envs(lambda one, action: _step_one(env, one, action))(
        carry, jnp.asarray(actions, jnp.float32)
    )
    ended = step.terminated | step.truncated
    start = _ready_for(env, _next_start(carry), ended)
    carry = _restarted(ended, stepped, start, start_key)
    return carry, step._replace(next_obs=carry.obs)


def unit_to_bounds(env: JaxEnv, actions: jax.Array) -> jax.Array:
    """[-1, 1] -> [low, high] in float32, as gymnasium's RescaleAction computes it; a Discrete env's index as
    it is (the host loop passes it unscaled too: rlbench.envs.discrete)."""
    if env.spec.discrete:
        return jnp.asarray(actions, jnp.float32)
    low = jnp.asarray(env.action_low, jnp.float32)
    high = jnp.asarray(env.action_high, jnp.float32)
    unit = jnp.clip(jnp.asarray(actions, jnp.float32), -1.0, 1.0)
    return low + (unit + 1.0) / 2.0 * (high - low)


def _over_envs(n_axes: int, fn: Callable[..., Any]) -> Callable[..., Any]:
    """`fn` of one env, vmapped over the leading env (and seed) axes."""
    for _ in range(n_axes):
        fn = jax.vmap(fn)
    return fn


def _reset_one(env: JaxEnv, key: jax.Array) -> EnvCarry:
    """The first episode from the chain's first split, and the key of the second's start (computed now too)."""
    key, reset_key, start_key = jax.random.split(key, 3)
    state, obs = env.reset(reset_key)
    return EnvCarry(state, jnp.asarray(obs, jnp.float32), key, jnp.zeros((), jnp.int32), _start_from(env, start_key))


def _start_from(env: JaxEnv, key: jax.Array) -> NextStart:
    state, obs = env.reset(key)
    return NextStart(state, jnp.asarray(obs, jnp.float32), key, jnp.ones((), jnp.bool_))


def _next_start(carry: EnvCarry) -> NextStart:
    assert carry.next_start is not None, "JAX-native envs carry their next starts (reset_envs)"
    return carry.next_start


def _step_one(env: JaxEnv, carry: EnvCarry, action: jax.Array) -> tuple[EnvCarry, EnvStep, jax.Array]:
    """(the env stepped, not yet restarted; the step, its next_obs the stepped obs; the key an episode that starts
    on this step draws for the start of the one after it)."""
    key, step_key, start_key = jax.random.split(carry.key, 3)
    state, obs, reward, terminated = env.step(carry.state, action, step_key)
    obs = jnp.asarray(obs, jnp.float32)
    terminated = jnp.asarray(terminated, jnp.bool_)
    elapsed = carry.elapsed + 1
    truncated = (elapsed >= env.max_episode_steps) & ~terminated
    reward = jnp.asarray(reward, jnp.float32)
    stepped = carry._replace(state=state, obs=obs, key=key, elapsed=elapsed)
    return stepped, EnvStep(obs, obs, reward, terminated, truncated), start_key


def _ready_for(env: JaxEnv, start: NextStart, ended: jax.Array) -> NextStart:
    """`start` with every env's computed, if an env in `ended` has its own not ready; else as it is (a cond whose
    predicate spans every seed's envs, so that it stays a branch under the seed axis)."""

    def computed(start: NextStart) -> NextStart:
        def one(start: NextStart) -> NextStart:
            fresh = _start_from(env, start.key)
            return jax.tree.map(lambda kept, new: jnp.where(start.ready, kept, new), start, fresh)

        ready: NextStart = _over_envs(ended.ndim, one)(start)
        return ready

    needed = (ended & ~start.ready).any()
    return cast(NextStart, jax.lax.cond(needed, computed, lambda start: start, start))


def _restarted(ended: jax.Array, stepped: EnvCarry, start: NextStart, start_key: jax.Array) -> EnvCarry:
    """The envs in `ended` continue from their next starts, and draw `start_key` for the ones after them."""

    def one(ended: jax.Array, stepped: EnvCarry, start: NextStart, start_key: jax.Array) -> EnvCarry:
        state = jax.tree.map(lambda fresh, kept: jnp.where(ended, fresh, kept), start.state, stepped.state)
        obs = jnp.where(ended, start.obs, stepped.obs)
        elapsed = jnp.where(ended, 0, stepped.elapsed).astype(jnp.int32)
        following = start._replace(key=jnp.where(ended, start_key, start.key), ready=start.ready & ~ended)
        return EnvCarry(state, obs, stepped.key, elapsed, following)

    restarted: EnvCarry = _over_envs(ended.ndim, one)(ended, stepped, start, start_key)
    return restarted
