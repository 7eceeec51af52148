#!/usr/bin/env python3
"""rlbench's device-loop PPO beside Brax's own PPO trainer (`brax.training.agents.ppo.train`) on one Brax env,
with the same rollout, minibatch and epoch settings and the same networks, side by side in one invocation
(issue 45). Both step the same physics, so the difference is each trainer's loop and update.

    python benchmarks/brax_ppo_speed.py --env inverted_pendulum --envs 128 --unroll 16 --minibatches 4 --epochs 4
    python benchmarks/brax_ppo_speed.py --env halfcheetah --envs 2048 --unroll 20 --minibatches 32 --epochs 8 \
        --n-seeds 10 --steps 2000000        (scripts/gpu_bench.sh's ppo phase, on a GPU)

With --n-seeds K, rlbench trains K seeds vmapped in one run (aggregate env-steps/s: K x steps / time); Brax's
trainer trains one seed per run, so K seeds take K of its runs (its aggregate is its own rate).

Settings mapped: Brax collects batch_size x num_minibatches unrolls of `unroll_length` per training step; with
batch_size x num_minibatches == num_envs that is one unroll of every env, i.e. rlbench's n_steps = unroll_length
rollout of n_envs envs, split into num_minibatches minibatches of batch_size x unroll_length transitions, for
num_updates_per_batch (n_epochs) passes. Networks: [64, 64] tanh policy and value for both (SB3's default);
no observation normalization, no reward scaling, entropy 0, gamma 0.99, GAE 0.95, clip 0.2, max_grad_norm 0.5.

Brax is timed by its own `training/sps` of the last training epoch (after the first, which compiles); rlbench
by a whole train.py run (in process) after a first one that compiled the same programs, and by that run's
training loop alone (its "Trained ... in X s" line; 0.1 s resolution). Prints JSON lines; the summary's ratio
is of the whole run's rate.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import io
import json
import re
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks.entry_speed import cpu_flags  # noqa: E402
from rlbench.bench.speed import machine  # noqa: E402
from rlbench.cli.train import main as train  # noqa: E402


def replicated_on(tree, devices):
    """jax.device_put_replicated, which JAX 0.10 removed and Brax 0.14.2's trainer still calls: each leaf
    stacked once per device on a leading axis (one device here: the CPU)."""
    import jax
    import jax.numpy as jnp

    stacked = jax.tree.map(lambda leaf: jnp.stack([jnp.asarray(leaf)] * len(devices)), tree)
    return jax.device_put(stacked, devices[0])


def brax_sps(env_name: str, args: argparse.Namespace, steps: int) -> float:
    import jax

    if len(jax.devices()) != 1:
        raise SystemExit("this comparison runs on one device (the shim below replicates onto one)")
    jax.device_put_replicated = replicated_on  # Brax 0.14.2 on JAX 0.10.2
    from brax import envs
    from brax.training.agents.ppo import networks as ppo_networks
    from brax.training.agents.ppo import train as ppo
    from flax import linen

    per_epoch = args.envs * args.unroll
    network = functools.partial(
        ppo_networks.make_ppo_networks,
        policy_hidden_layer_sizes=(64, 64),
        value_hidden_layer_sizes=(64, 64),
        activation=linen.tanh,
    )
    seen = []
    ppo.train(
        environment=envs.get_environment(env_name),
        num_timesteps=4 * max(steps, per_epoch),
        num_evals=5,  # 4 training epochs between 5 evaluations: the last 3 are timed apart from compilation
        num_envs=args.envs,
        episode_length=1000,
        unroll_length=args.unroll,
        batch_size=args.envs // args.minibatches,
        num_minibatches=args.minibatches,
        num_updates_per_batch=args.epochs,
        learning_rate=3e-4,
        entropy_cost=0.0,
        discounting=0.99,
        gae_lambda=0.95,
        clipping_epsilon=0.2,
        max_grad_norm=0.5,
        normalize_observations=False,
        reward_scaling=1.0,
        network_factory=network,
        seed=0,
        progress_fn=lambda step, metrics: seen.append(metrics.get("training/sps")),
    )
    rates = [rate for rate in seen if rate is not None]
    return float(rates[-1])


def rlbench_rate(env_name: str, args: argparse.Namespace, steps: int) -> tuple[float, float]:
    """(aggregate env-steps/s of the whole train.py run, of its training loop alone): the second, from the
    run's own "Trained ... in X s" line, leaves out what Brax's training/sps leaves out too (building the
    env and the learner, the run folder), but keeps the final checkpoint."""
    rollout = args.envs * args.unroll
    params = [
        f"n_envs:{args.envs}", f"n_steps:{args.unroll}", f"batch_size:{rollout // args.minibatches}",
        f"n_epochs:{args.epochs}", "learning_rate:0.0003", "ent_coef:0.0", "gamma:0.99", "gae_lambda:0.95",
        "clip_range:0.2", "max_grad_norm:0.5", "policy_kwargs:dict(net_arch=dict(pi=[64, 64], vf=[64, 64]))",
    ]  # fmt: skip
    with tempfile.TemporaryDirectory() as folder:
        argv = ["--algo", "ppo", "--env", f"brax:{env_name}", "-f", folder, "--eval-freq", "-1", "--verbose", "0"]
        argv += ["--seed", "0", "--n-seeds", str(args.n_seeds), "-params", *params]
        with contextlib.redirect_stdout(io.StringIO()):
            assert train([*argv, "-n", str(2 * rollout)]) == 0  # compiles
        printed = io.StringIO()
        start = time.perf_counter()
        with contextlib.redirect_stdout(printed):
            assert train([*argv, "-n", str(steps), "--verbose", "1", "--log-interval", "1000000"]) == 0
        whole = time.perf_counter() - start
        loop = float(re.search(r"^Trained .* in ([0-9.]+) s;", printed.getvalue(), re.M).group(1))
        return args.n_seeds * steps / whole, args.n_seeds * steps / loop


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--env", default="inverted_pendulum", help="a Brax env name")
    parser.add_argument("--steps", type=int, default=262_144)
    parser.add_argument("--envs", type=int, default=128)
    parser.add_argument("--unroll", type=int, default=16)
    parser.add_argument("--minibatches", type=int, default=4)
    parser.add_argument("--epochs", type=int, default=4)
    parser.add_argument("--n-seeds", type=int, default=1, help="rlbench's seeds, vmapped in one run")
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    names = ("env", "steps", "envs", "unroll", "minibatches", "epochs", "n_seeds")
    settings = {name: getattr(args, name) for name in names}
    print(json.dumps({"machine": machine(), "cpu_flags": cpu_flags(), "settings": settings}), flush=True)
    ours, theirs = [], []
    for _ in range(args.rounds):
        whole, loop = rlbench_rate(args.env, args, args.steps)
        ours.append(whole)
        rates = {"aggregate_env_steps_per_s": round(whole, 1), "training_loop_env_steps_per_s": round(loop, 1)}
        print(json.dumps({"system": "rlbench", **rates}), flush=True)
        theirs.append(brax_sps(args.env, args, args.steps))
        print(json.dumps({"system": "brax", "env_steps_per_s": round(theirs[-1], 1)}), flush=True)
    best = {"rlbench": round(max(ours), 1), "brax": round(max(theirs), 1)}
    print(json.dumps({**settings, **best, "ratio": round(max(ours) / max(theirs), 2)}), flush=True)


if __name__ == "__main__":
    main()
