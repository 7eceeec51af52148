#!/usr/bin/env python3
"""Peer speed reference for TQC: SBX's TQC, timed as ../shared/bench/sbx_speed.py times SAC and CrossQ
(that script has no TQC). Run it in the peer's virtual environment, through rlbench's benchmark:

    python -m rlbench.bench speed --peer /tmp/sbx-venv/bin/python --peer-script benchmarks/sbx_tqc_speed.py \
        --case tqc 1 1 3000

Prints one JSON line with the shared script's fields: env-steps/s and gradient-steps/s after a warm-up
that pays for compilation. Settings as rlbench's `bench speed` rows: learning_starts 1000, train_freq 1,
actor [256, 256], the given critic widths, and TQC's defaults (2 critics of 25 quantiles, 2 dropped each).
"""

import argparse
import json
import time

from sbx import TQC
from stable_baselines3.common.env_util import make_vec_env

parser = argparse.ArgumentParser()
parser.add_argument("--algo", choices=["tqc"], default="tqc")
parser.add_argument("--env", default="HalfCheetah-v4")
parser.add_argument("--n-envs", type=int, default=1)
parser.add_argument("--gradient-steps", type=int, default=1)
parser.add_argument("--steps", type=int, default=3000, help="env steps timed after the warm-up")
parser.add_argument("--qf", type=int, nargs="+", default=[256, 256], help="critic widths")
args = parser.parse_args()

env = make_vec_env(args.env, n_envs=args.n_envs, seed=0)
policy_kwargs = dict(net_arch=dict(pi=[256, 256], qf=args.qf), n_quantiles=25, n_critics=2)
model = TQC(
    "MlpPolicy",
    env,
    learning_starts=1000,
    train_freq=1,
    gradient_steps=args.gradient_steps,
    top_quantiles_to_drop_per_net=2,
    policy_kwargs=policy_kwargs,
    verbose=0,
    seed=0,
)
model.learn(total_timesteps=1000 + 100 * args.n_envs)  # random phase + compilation
start = time.perf_counter()
model.learn(total_timesteps=args.steps, reset_num_timesteps=False)
seconds = time.perf_counter() - start
updates = args.steps / args.n_envs * args.gradient_steps
print(
    json.dumps(
        {
            "system": "sbx",
            "algo": args.algo,
            "env": args.env,
            "n_envs": args.n_envs,
            "gradient_steps": args.gradient_steps,
            "qf": args.qf,
            "env_steps_per_s": round(args.steps / seconds, 1),
            "grad_steps_per_s": round(updates / seconds, 1),
        }
    )
)
