#!/usr/bin/env python3
"""Peer speed reference for PPO and DQN: SBX's learner with an RL Zoo entry (rlbench's hyperparams/<algo>.yml, which
is RL Zoo 2.9.2's file unchanged), timed after a warm-up that pays for compilation. Run in the peer's venv by
benchmarks/entry_speed.py, which times rlbench beside it in the same invocation:

    /tmp/sbx-venv/bin/python benchmarks/sbx_entry_speed.py --env CartPole-v1 --steps 20000
    /tmp/sbx-venv/bin/python benchmarks/sbx_entry_speed.py --algo dqn --env CartPole-v1 --steps 20000

RL Zoo's string values (policy_kwargs) are evaluated here as RL Zoo evaluates them: this script is the peer's
benchmark, run on rlbench's own file, never rlbench code. Prints one JSON line: env-steps/s.
"""

import argparse
import json
import time
from pathlib import Path
from types import SimpleNamespace

import flax.linen
import numpy as np
import yaml
from sbx import DQN, PPO
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.vec_env import VecNormalize

# RL Zoo's policy_kwargs name torch's nn.ReLU; SBX's networks take the JAX function of that name.
nn = SimpleNamespace(ReLU=flax.linen.relu, Tanh=flax.linen.tanh, ELU=flax.linen.elu, LeakyReLU=flax.linen.leaky_relu)

parser = argparse.ArgumentParser()
parser.add_argument("--algo", choices=["ppo", "dqn"], default="ppo")
parser.add_argument("--env", default="CartPole-v1")
parser.add_argument("--steps", type=int, default=20000, help="env steps timed after the warm-up")
parser.add_argument(
    "--warmup", type=int, default=0, help="env steps of the warm-up (default: two rollouts, or two training rounds)"
)
parser.add_argument("--no-normalize", action="store_true", help="the entry without its VecNormalize")
args = parser.parse_args()

entry = yaml.safe_load((Path(__file__).resolve().parents[1] / "hyperparams" / f"{args.algo}.yml").read_text())[args.env]
n_envs = int(entry.pop("n_envs", 1))
normalize = entry.pop("normalize", False) and not args.no_normalize
for key in ("n_timesteps", "policy"):
    entry.pop(key, None)
for key in ("learning_rate", "clip_range"):
    if isinstance(entry.get(key), str) and entry[key].startswith("lin_"):
        start = float(entry[key][4:])
        entry[key] = lambda progress, start=start: progress * start
if isinstance(entry.get("policy_kwargs"), str):
    entry["policy_kwargs"] = eval(entry["policy_kwargs"])  # RL Zoo's own spelling, as RL Zoo reads it
env = make_vec_env(args.env, n_envs=n_envs, seed=0)
if normalize:
    env = VecNormalize(env, gamma=entry.get("gamma", 0.99))
if args.algo == "ppo":
    model = PPO("MlpPolicy", env, verbose=0, seed=0, **entry)
    rollout = model.n_steps * n_envs
else:  # past learning_starts, then two training rounds
    model = DQN("MlpPolicy", env, verbose=0, seed=0, **entry)
    rollout = model.learning_starts + 2 * model.train_freq.frequency * n_envs
model.learn(total_timesteps=args.warmup or 2 * rollout)  # compilation
start = time.perf_counter()
model.learn(total_timesteps=args.steps, reset_num_timesteps=False)
seconds = time.perf_counter() - start
print(json.dumps({
    "system": "sbx", "algo": args.algo, "env": args.env, "n_envs": n_envs, "rollout": rollout,
    "steps": int(model.num_timesteps), "env_steps_per_s": round(args.steps / seconds, 1),
    "sbx_version": __import__("sbx").__version__, "numpy": np.__version__,
}))  # fmt: skip
