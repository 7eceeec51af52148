#!/usr/bin/env python3
"""What restarting ended episodes costs the device loop's env step (issue 45: the device loop beside Brax's PPO).

    python benchmarks/jax_env_resets.py --env brax:inverted_pendulum --envs 128

Times, per vector step inside a 16-step `lax.scan` (as the device loop steps), best of --rounds rounds:

1. `raw step`: the env's own step, vmapped, nothing restarted;
2. `stored first state`: the step, then the ended envs' state selected from the state each env first reset to, as
   Brax's trainer restarts an ended env (its AutoResetWrapper: every episode of an env starts from one state);
3. `step_envs`: rlbench's step (rlbench.envs.jax_native.vector): the key chain's split, the step and a select of
   the ended envs' next starts, computed ahead (a fresh start for each episode, as gymnasium's; no episode ends
   here, so none is computed: the cost of a step between two computations);
4. `reset in every step`: rlbench's step until 2026-12-08: the key chain's split, the step, a reset of every env
   from its reset key and a select of the ended ones;
5. `8 envs reset`: the raw step plus a reset of 8 envs gathered by index and scattered back, the cost of restarting
   only the few envs a step ends (tried and dropped on 2026-12-07: it costs what resetting all 128 does).

The five are alternated over the rounds, so that the machine's drift hits each alike.

Prints one JSON line per measurement, with the machine.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path

import jax
import jax.numpy as jnp

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from rlbench.bench.speed import machine
from rlbench.envs.jax_native.ids import make_jax_env
from rlbench.envs.jax_native.vector import EnvCarry, reset_envs, step_envs

STEPS = 16


def best_us_per_step(program: Callable[[EnvCarry], object], carry: EnvCarry, rounds: int = 5, calls: int = 20) -> float:
    jax.block_until_ready(program(carry))
    best = float("inf")
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(calls):
            out = program(carry)
        jax.block_until_ready(out)
        best = min(best, (time.perf_counter() - start) / calls / STEPS)
    return best * 1e6


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--env", default="brax:inverted_pendulum")
    parser.add_argument("--envs", type=int, default=128)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    env = make_jax_env(args.env, {})
    carry = reset_envs(env, jnp.arange(args.envs))
    # Unit actions of 0 (the bounds' middle): no episode of inverted_pendulum ends within the 16 steps.
    actions = jnp.zeros((args.envs, env.spec.action_dim), jnp.float32)
    keys = jax.random.split(jax.random.key(0), args.envs)

    def scanned(step: Callable[[EnvCarry], EnvCarry]) -> Callable[[EnvCarry], EnvCarry]:
        return jax.jit(lambda c: jax.lax.scan(lambda c, _: (step(c), None), c, None, length=STEPS)[0])

    def raw(c: EnvCarry) -> EnvCarry:
        state, obs, _, _ = jax.vmap(env.step)(c.state, actions, keys)
        return c._replace(state=state, obs=jnp.asarray(obs, jnp.float32))

    def stored_first_state(c: EnvCarry) -> EnvCarry:
        state, obs, _, terminated = jax.vmap(env.step)(c.state, actions, keys)
        ended = jnp.asarray(terminated, bool)
        where = lambda first, s: jnp.where(ended.reshape(ended.shape + (1,) * (s.ndim - 1)), first, s)  # noqa: E731
        return c._replace(state=jax.tree.map(where, carry.state, state), obs=jnp.asarray(obs, jnp.float32))

    def eight_envs_reset(c: EnvCarry) -> EnvCarry:
        state, obs, _, terminated = jax.vmap(env.step)(c.state, actions, keys)
        index = jnp.nonzero(jnp.asarray(terminated, bool), size=8, fill_value=args.envs)[0]  # none ended: all fill
        fresh, _ = jax.vmap(env.reset)(keys[jnp.minimum(index, args.envs - 1)])
        state = jax.tree.map(lambda old, new: old.at[index].set(new, mode="drop"), state, fresh)
        return c._replace(state=state, obs=jnp.asarray(obs, jnp.float32))

    def reset_in_every_step(c: EnvCarry) -> EnvCarry:
        def one(c: EnvCarry, action: jax.Array) -> EnvCarry:
            key, step_key, reset_key = jax.random.split(c.key, 3)
            state, obs, _, terminated = env.step(c.state, action, step_key)
            elapsed = c.elapsed + 1
            ended = jnp.asarray(terminated, bool) | (elapsed >= env.max_episode_steps)
            fresh, fresh_obs = env.reset(reset_key)
            state = jax.tree.map(lambda new, old: jnp.where(ended, new, old), fresh, state)
            obs = jnp.where(ended, jnp.asarray(fresh_obs, jnp.float32), jnp.asarray(obs, jnp.float32))
            return c._replace(state=state, obs=obs, key=key, elapsed=jnp.where(ended, 0, elapsed))

        return jax.vmap(one)(c, actions)

    cases = {
        "raw step": raw,
        "stored first state": stored_first_state,
        "step_envs": lambda c: step_envs(env, c, actions)[0],
        "reset in every step": reset_in_every_step,
        "8 envs reset": eight_envs_reset,
    }
    print(json.dumps({"machine": machine(), "env": args.env, "envs": args.envs}))
    programs = {name: scanned(step) for name, step in cases.items()}
    best = dict.fromkeys(cases, float("inf"))
    for _ in range(args.rounds):
        for name, program in programs.items():
            best[name] = min(best[name], best_us_per_step(program, carry, rounds=1))
    for name, us in best.items():
        print(json.dumps({"case": name, "us_per_vector_step": round(us, 1)}), flush=True)


if __name__ == "__main__":
    main()
