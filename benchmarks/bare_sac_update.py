"""Is rlbench's fused SAC update the bare math? Time it against a minimal hand-written one, interleaved.

    python benchmarks/bare_sac_update.py [--rounds 4] [--gradient-steps 8]

The bare update is SAC with nothing but arrays: two [256, 256] critics (vmapped), a tanh-Gaussian actor,
Polyak targets, log-alpha temperature, hand-written Adam, `lax.scan` over the gradient steps, buffers
donated. No Flax modules, no optax, no policy-delay branch, no metrics, no learning-rate leaf. Both run
on the same fixed random batches (HalfCheetah-v4 shapes, batch 256) in one process, in alternating rounds,
so machine noise hits both alike. Prints gradient steps/s per round and the ratio of the medians.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import jax
import jax.numpy as jnp
import numpy as np

from rlbench.bench.row import bench_config, random_batches
from rlbench.config.registry import ALGORITHMS
from rlbench.networks.actor import LOG_STD_MAX, LOG_STD_MIN, sample_action
from rlbench.types import EnvSpec

HALF_CHEETAH_SPEC = (17, 6)  # HalfCheetah-v4's observation and action sizes

OBS_DIM, ACTION_DIM = HALF_CHEETAH_SPEC
WIDTH, GAMMA, TAU, LR = 256, 0.99, 0.005, 3e-4


def _mlp_init(key, sizes):
    keys = jax.random.split(key, len(sizes) - 1)
    return [
        {"w": jax.random.normal(k, (i, o)) / np.sqrt(i), "b": jnp.zeros(o)}
        for k, i, o in zip(keys, sizes[:-1], sizes[1:], strict=True)
    ]


def _mlp(layers, x):
    for layer in layers[:-1]:
        x = jax.nn.relu(x @ layer["w"] + layer["b"])
    return x @ layers[-1]["w"] + layers[-1]["b"]


def _actor(params, obs, key):
    out = _mlp(params, obs)
    log_std = jnp.clip(out[:, ACTION_DIM:], LOG_STD_MIN, LOG_STD_MAX)
    return sample_action(out[:, :ACTION_DIM], log_std, key)  # plain jnp math, the same as rlbench's actor


def _critics(params, obs, action):
    x = jnp.concatenate([obs, action], -1)
    return jax.vmap(lambda p: _mlp(p, x)[:, 0])(params)  # [2, B]


def _adam(params, grads, m, v, t):
    m = jax.tree.map(lambda m, g: 0.9 * m + 0.1 * g, m, grads)
    v = jax.tree.map(lambda v, g: 0.999 * v + 0.001 * g * g, v, grads)
    m_hat, v_hat = 1 - 0.9**t, 1 - 0.999**t
    params = jax.tree.map(lambda p, m, v: p - LR * (m / m_hat) / (jnp.sqrt(v / v_hat) + 1e-8), params, m, v)
    return params, m, v


def bare_init(key):
    actor_key, critic_key = jax.random.split(key)
    actor = _mlp_init(actor_key, [OBS_DIM, WIDTH, WIDTH, 2 * ACTION_DIM])
    critics = jax.vmap(lambda k: _mlp_init(k, [OBS_DIM + ACTION_DIM, WIDTH, WIDTH, 1]))(jax.random.split(critic_key))
    zeros = lambda tree: jax.tree.map(jnp.zeros_like, tree)  # noqa: E731
    return {
        "actor": actor,
        "actor_m": zeros(actor),
        "actor_v": zeros(actor),
        "critics": critics,
        "target": critics,
        "critics_m": zeros(critics),
        "critics_v": zeros(critics),
        "log_alpha": jnp.zeros(()),
        "log_alpha_m": jnp.zeros(()),
        "log_alpha_v": jnp.zeros(()),
        "t": jnp.zeros(()),
    }


def bare_gradient_step(s, batch_and_key):
    (obs, action, reward, next_obs, terminated), key = batch_and_key
    next_key, actor_key = jax.random.split(key)
    t, alpha = s["t"] + 1, jnp.exp(s["log_alpha"])
    next_action, next_log_prob = _actor(s["actor"], next_obs, next_key)
    next_q = _critics(s["target"], next_obs, next_action).min(0) - alpha * next_log_prob
    target = jax.lax.stop_gradient(reward + GAMMA * (1 - terminated) * next_q)
    grads = jax.grad(lambda c: 0.5 * ((_critics(c, obs, action) - target) ** 2).mean(1).sum())(s["critics"])
    critics, critics_m, critics_v = _adam(s["critics"], grads, s["critics_m"], s["critics_v"], t)
    target_params = jax.tree.map(lambda old, new: (1 - TAU) * old + TAU * new, s["target"], critics)

    def actor_loss(actor):
        pi_action, log_prob = _actor(actor, obs, actor_key)
        return (alpha * log_prob - _critics(critics, obs, pi_action).min(0)).mean(), log_prob

    grads, log_prob = jax.grad(actor_loss, has_aux=True)(s["actor"])
    actor, actor_m, actor_v = _adam(s["actor"], grads, s["actor_m"], s["actor_v"], t)
    alpha_grad = -jax.lax.stop_gradient(log_prob - ACTION_DIM).mean()
    log_alpha, log_alpha_m, log_alpha_v = _adam(s["log_alpha"], alpha_grad, s["log_alpha_m"], s["log_alpha_v"], t)
    return {
        "actor": actor,
        "actor_m": actor_m,
        "actor_v": actor_v,
        "critics": critics,
        "target": target_params,
        "critics_m": critics_m,
        "critics_v": critics_v,
        "log_alpha": log_alpha,
        "log_alpha_m": log_alpha_m,
        "log_alpha_v": log_alpha_v,
        "t": t,
    }, None


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=4)
    p.add_argument("--gradient-steps", type=int, default=8)
    p.add_argument("--calls", type=int, default=60, help="fused calls per round and system")
    args = p.parse_args()
    n = args.gradient_steps

    spec = EnvSpec(*HALF_CHEETAH_SPEC)
    cfg = bench_config("sac", n, [WIDTH, WIDTH])
    learner = ALGORITHMS["sac"].make_learner(cfg, spec)
    batches = random_batches(spec, n, cfg.batch_size)
    keys = jax.random.split(jax.random.key(1), n)
    progress = np.float32(1.0)
    rlbench_steps = jax.jit(learner.gradient_steps_fn, donate_argnums=0)
    bare_steps = jax.jit(lambda s, b, k: jax.lax.scan(bare_gradient_step, s, (b, k))[0], donate_argnums=0)
    bare_batches = (batches.obs, batches.action, batches.reward, batches.next_obs, batches.terminated)

    states = {"rlbench": jax.jit(learner.init_fn)(jax.random.key(0)), "bare": jax.jit(bare_init)(jax.random.key(0))}
    calls = {
        "rlbench": lambda s: rlbench_steps(s, batches, keys, progress, 0)[0],  # SAC (policy_delay 1) ignores first_step
        "bare": lambda s: bare_steps(s, bare_batches, keys),
    }
    rates: dict[str, list[float]] = {name: [] for name in calls}
    for name, call in calls.items():  # compile and warm up
        states[name] = jax.block_until_ready(call(states[name]))
    for _ in range(args.rounds):
        for name, call in calls.items():
            start = time.perf_counter()
            for _ in range(args.calls):
                states[name] = call(states[name])
            jax.block_until_ready(states[name])
            rates[name].append(round(args.calls * n / (time.perf_counter() - start), 1))
    medians = {name: statistics.median(r) for name, r in rates.items()}
    print(
        json.dumps(
            {
                "gradient_steps_per_call": n,
                "grad_steps_per_s": rates,
                "median": medians,
                "rlbench_over_bare": round(medians["rlbench"] / medians["bare"], 3),
            }
        )
    )


if __name__ == "__main__":
    main()
