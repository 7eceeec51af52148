#!/usr/bin/env python3
"""Peer speed reference: SBX's SAC, TQC, CrossQ, DroQ and TD3, timed as ../shared/bench/sbx_speed.py times SAC
and CrossQ (that script has no TQC), so that one `bench speed` invocation can put every algorithm beside
its peer. Run it in the peer's virtual environment, through rlbench's benchmark:

    python -m rlbench.bench speed --peer /tmp/sbx-venv/bin/python --peer-script benchmarks/sbx_speed.py \
        --case sac 1 1 3000 --case tqc 1 1 3000 --case sac 8 8 4000

Prints one JSON line with the shared script's fields: env-steps/s and gradient-steps/s after a warm-up
that pays for compilation. Settings as rlbench's `bench speed` rows: learning_starts 1000, train_freq 1,
actor [256, 256], the given critic widths (default [256, 256], CrossQ [1024, 1024]); TQC with its defaults
(2 critics of 25 quantiles, 2 dropped each); DroQ as SAC with dropout 0.01, layer norm and
policy_delay = gradient_steps; TD3 with RL Zoo's HalfCheetah action noise (normal, std 0.1) and
SBX's defaults otherwise (policy_delay 2, target smoothing 0.2 clipped at 0.5). `--policy SimbaPolicy`:
SBX's SimbaPolicy (residual blocks, AdamW) instead of MlpPolicy, with the same widths.
"""

import argparse
import json
import time

import numpy as np
from sbx import SAC, TD3, TQC, CrossQ
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.noise import NormalActionNoise

parser = argparse.ArgumentParser()
parser.add_argument("--algo", choices=["sac", "tqc", "crossq", "droq", "td3"], default="sac")
parser.add_argument("--env", default="HalfCheetah-v4")
parser.add_argument("--n-envs", type=int, default=1)
parser.add_argument("--gradient-steps", type=int, default=1)
parser.add_argument("--steps", type=int, default=3000, help="env steps timed after the warm-up")
parser.add_argument("--qf", type=int, nargs="+", default=None, help="critic widths")
parser.add_argument("--policy", choices=["MlpPolicy", "SimbaPolicy"], default="MlpPolicy")
args = parser.parse_args()

qf = args.qf or ([1024, 1024] if args.algo == "crossq" else [256, 256])
policy_kwargs = dict(net_arch=dict(pi=[256, 256], qf=qf))
settings = dict(learning_starts=1000, train_freq=1, gradient_steps=args.gradient_steps, verbose=0, seed=0)
algo_class = {"sac": SAC, "tqc": TQC, "crossq": CrossQ, "droq": SAC, "td3": TD3}[args.algo]
env = make_vec_env(args.env, n_envs=args.n_envs, seed=0)
if args.algo == "tqc":
    policy_kwargs.update(n_quantiles=25, n_critics=2)
    settings.update(top_quantiles_to_drop_per_net=2)
elif args.algo == "droq":
    policy_kwargs.update(dropout_rate=0.01, layer_norm=True)
    settings.update(policy_delay=args.gradient_steps)
elif args.algo == "td3":
    n_actions = env.action_space.shape[0]
    settings.update(action_noise=NormalActionNoise(np.zeros(n_actions), 0.1 * np.ones(n_actions)))

model = algo_class(args.policy, env, policy_kwargs=policy_kwargs, **settings)
model.learn(total_timesteps=1000 + 100 * args.n_envs)  # random phase + compilation
start = time.perf_counter()
model.learn(total_timesteps=args.steps, reset_num_timesteps=False)
seconds = time.perf_counter() - start
updates = args.steps / args.n_envs * args.gradient_steps
row = {
    "system": "sbx",
    "algo": args.algo,
    "env": args.env,
    "n_envs": args.n_envs,
    "gradient_steps": args.gradient_steps,
    "qf": qf,
    **({"policy": args.policy} if args.policy != "MlpPolicy" else {}),
    "env_steps_per_s": round(args.steps / seconds, 1),
    "grad_steps_per_s": round(updates / seconds, 1),
}
print(json.dumps(row))
