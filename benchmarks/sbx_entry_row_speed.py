#!/usr/bin/env python3
"""`bench speed --algos ppo|dqn --peer PYTHON`'s peer: SBX's PPO or DQN trained on the row's resolved entry, timed as
rlbench's row is timed. Run in the peer's venv (sbx-rl, never an rlbench dependency) by rlbench.bench.entry_row:

    /tmp/sbx-venv/bin/python benchmarks/sbx_entry_row_speed.py --algo ppo --env CartPole-v1 --steps 4096 --entry '{...}'

`--entry` is rlbench's resolved entry in RL Zoo's spelling (rlbench.bench.peer_hyperparams.peer_entry, every
setting written out and anything SBX cannot express already refused), read here as RL Zoo reads its keys:
`lin_<x>` schedules for learning_rate and clip_range (x times the progress remaining), `normalize` as
VecNormalize's arguments with the entry's gamma, env_kwargs to the env; policy_kwargs.activation_fn is a
flax.linen function's name. No `eval`. Warm-up: learning_starts (DQN) and two updates (PPO's rollouts, DQN's
train_freq steps; the first compiles), then `--steps` env steps timed in one learn(). Prints one JSON line.
"""

import argparse
import importlib
import json
import time

import flax.linen
import numpy as np
from sbx import DQN, PPO
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.vec_env import VecFrameStack, VecNormalize

RUN_KEYS = ("n_timesteps", "n_envs", "normalize", "env_kwargs", "policy", "env_wrapper", "frame_stack")
# The env wrappers an entry may name here (RL Zoo's atari entries), looked up by name: nothing else is imported.
WRAPPERS = {
    "stable_baselines3.common.atari_wrappers.AtariWrapper": ("stable_baselines3.common.atari_wrappers", "AtariWrapper")
}
CLASSES = {"ppo": PPO, "dqn": DQN}


def schedule(value):
    """RL Zoo's spelling of a schedule: lin_<x> decays linearly from x to 0 (SB3's progress_remaining)."""
    if isinstance(value, str) and value.startswith("lin_"):
        start = float(value[4:])
        return lambda progress_remaining: progress_remaining * start
    return value


def env_wrapper(listed):
    """RL Zoo's env_wrapper (one of WRAPPERS, with its kwargs) as make_vec_env's wrapper_class and kwargs."""
    if not listed:
        return None, None
    if len(listed) != 1:
        raise SystemExit(f"env_wrapper: one wrapper at most here, got {listed}")
    ((name, kwargs),) = (listed[0] if isinstance(listed[0], dict) else {listed[0]: {}}).items()
    module, cls = WRAPPERS[name]
    return getattr(importlib.import_module(module), cls), dict(kwargs or {})


def gradient_steps_per_update(model, algo: str, update: int) -> int:
    """PPO: n_epochs minibatches of batch_size per rollout; DQN: gradient_steps (-1: the update's env steps)."""
    if algo == "ppo":
        return model.n_epochs * -(-update // model.batch_size)
    return update if model.gradient_steps < 0 else model.gradient_steps


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--algo", choices=sorted(CLASSES), default="ppo")
    parser.add_argument("--env", required=True)
    parser.add_argument("--steps", type=int, required=True, help="env steps timed after the warm-up")
    parser.add_argument("--entry", required=True, help="the entry as JSON, in RL Zoo's spelling")
    args = parser.parse_args()

    entry = json.loads(args.entry)
    n_envs = int(entry.get("n_envs", 1))
    if args.env.endswith("NoFrameskip-v4") or args.env.startswith("ALE/"):  # as RL Zoo: ale-py registers its ids
        import ale_py
        import gymnasium

        gymnasium.register_envs(ale_py)
    wrapper_class, wrapper_kwargs = env_wrapper(entry.get("env_wrapper"))
    env = make_vec_env(
        args.env,
        n_envs=n_envs,
        seed=0,
        env_kwargs=entry.get("env_kwargs"),
        wrapper_class=wrapper_class,
        wrapper_kwargs=wrapper_kwargs,
    )
    if entry.get("frame_stack"):  # RL Zoo's frame_stack: VecFrameStack over the vector env
        env = VecFrameStack(env, n_stack=int(entry["frame_stack"]))
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
    policy = entry.get("policy", "MlpPolicy")
    model = CLASSES[args.algo](policy, env, policy_kwargs=policy_kwargs, verbose=0, seed=0, **settings)
    if args.algo == "ppo":
        update, warmup = model.n_steps * n_envs, 0
    else:
        update, warmup = model.train_freq.frequency * n_envs, model.learning_starts
    warmup += 2 * update
    model.learn(total_timesteps=warmup)  # the first update compiles
    before, start = int(model.num_timesteps), time.perf_counter()  # SB3 may collect past `warmup`: whole updates
    model.learn(total_timesteps=args.steps, reset_num_timesteps=False)
    seconds = time.perf_counter() - start
    timed = int(model.num_timesteps) - before
    per_update = gradient_steps_per_update(model, args.algo, update)
    print(
        json.dumps(
            {
                "system": "sbx",
                "algo": args.algo,
                "env": args.env,
                "n_envs": n_envs,
                "rollout": update,
                "batch_size": model.batch_size,
                "grad_steps_per_rollout": per_update,
                "steps": timed,
                "env_steps_per_s": round(timed / seconds, 1),
                "grad_steps_per_s": round(timed / update * per_update / seconds, 1),
                "sbx_version": __import__("sbx").__version__,
                "numpy": np.__version__,
            }
        )
    )


if __name__ == "__main__":
    main()
