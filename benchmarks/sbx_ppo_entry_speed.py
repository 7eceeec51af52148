#!/usr/bin/env python3
"""`bench speed --algos ppo --peer PYTHON`'s peer: SBX's PPO trained on the row's resolved entry, timed as rlbench's
row is timed. Run in the peer's venv (sbx-rl, never an rlbench dependency) by rlbench.bench.on_policy_row:

    /tmp/sbx-venv/bin/python benchmarks/sbx_ppo_entry_speed.py --env CartPole-v1 --steps 4096 --entry '{...}'

`--entry` is rlbench's resolved entry in RL Zoo's spelling (rlbench.bench.peer_hyperparams.peer_entry, every
setting written out and anything SBX cannot express already refused), read here as RL Zoo reads its keys:
`lin_<x>` schedules for learning_rate and clip_range (x times the progress remaining), `normalize` as
VecNormalize's arguments with the entry's gamma, env_kwargs to the env; policy_kwargs.activation_fn is a
flax.linen function's name. No `eval`. Two rollouts of warm-up (the first compiles), then `--steps` env steps
timed in one learn(). Prints one JSON line.
"""

import argparse
import json
import time

import flax.linen
import numpy as np
from sbx import PPO
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.vec_env import VecNormalize

RUN_KEYS = ("n_timesteps", "n_envs", "normalize", "env_kwargs", "policy")


def schedule(value):
    """RL Zoo's spelling of a schedule: lin_<x> decays linearly from x to 0 (SB3's progress_remaining)."""
    if isinstance(value, str) and value.startswith("lin_"):
        start = float(value[4:])
        return lambda progress_remaining: progress_remaining * start
    return value


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--env", required=True)
    parser.add_argument("--steps", type=int, required=True, help="env steps timed after the warm-up")
    parser.add_argument("--entry", required=True, help="the entry as JSON, in RL Zoo's spelling")
    args = parser.parse_args()

    entry = json.loads(args.entry)
    n_envs = int(entry.get("n_envs", 1))
    env = make_vec_env(args.env, n_envs=n_envs, seed=0, env_kwargs=entry.get("env_kwargs"))
    normalize = entry.get("normalize", False)
    if normalize:
        kwargs = dict(normalize) if isinstance(normalize, dict) else {}
        env = VecNormalize(env, **{**kwargs, "gamma": entry.get("gamma", 0.99)})  # RL Zoo's rule: the entry's gamma
    settings = {key: value for key, value in entry.items() if key not in RUN_KEYS}
    for key in ("learning_rate", "clip_range"):
        if key in settings:
            settings[key] = schedule(settings[key])
    policy_kwargs = dict(settings.pop("policy_kwargs", {}))
    if "activation_fn" in policy_kwargs:
        policy_kwargs["activation_fn"] = getattr(flax.linen, policy_kwargs["activation_fn"])
    model = PPO(entry.get("policy", "MlpPolicy"), env, policy_kwargs=policy_kwargs, verbose=0, seed=0, **settings)
    rollout = model.n_steps * n_envs
    model.learn(total_timesteps=2 * rollout)  # the first rollout compiles
    start = time.perf_counter()
    model.learn(total_timesteps=args.steps, reset_num_timesteps=False)
    seconds = time.perf_counter() - start
    timed = int(model.num_timesteps) - 2 * rollout
    minibatches = model.n_epochs * -(-rollout // model.batch_size)
    print(
        json.dumps(
            {
                "system": "sbx",
                "algo": "ppo",
                "env": args.env,
                "n_envs": n_envs,
                "rollout": rollout,
                "batch_size": model.batch_size,
                "grad_steps_per_rollout": minibatches,
                "steps": timed,
                "env_steps_per_s": round(timed / seconds, 1),
                "grad_steps_per_s": round(timed / rollout * minibatches / seconds, 1),
                "sbx_version": __import__("sbx").__version__,
                "numpy": np.__version__,
            }
        )
    )


if __name__ == "__main__":
    main()
