"""Run by the SBX peer's Python (not rlbench's): one minibatch step of SBX's own PPO (`PPO._one_update`) on the
parameters, minibatch and settings an npz file gives, with SGD at learning rate 1 in place of Adam, so that
each parameter's change is minus its gradient. Writes the changes and the losses to a second npz, under
rlbench's names. Usage: python sbx_ppo_step.py IN.npz OUT.npz

Written against SBX 0.28 (sbx.ppo.policies.Actor and Critic: Dense_0 ... Dense_k, the actor's log_std a
parameter; separate actor and value train states). rlbench's ActorCritic names its layers pi/, vf/,
action_head/ and value_head/ (OrthoDense_i/Dense_0).
"""

import sys

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax.training.train_state import TrainState
from sbx import PPO
from sbx.ppo.policies import Actor, Critic

SGD = optax.sgd(1.0)  # new = old - gradient


def sbx_params(data, tower: str, head: str, with_log_std: bool) -> dict:
    """SBX's flat Dense_i tree from rlbench's arrays: the hidden layers of `tower`, then `head`."""
    n_hidden = len({k.split("/")[2] for k in data if k.startswith(f"init/{tower}/")})
    params = {}
    for i in range(n_hidden):
        prefix = f"init/{tower}/OrthoDense_{i}/Dense_0"
        params[f"Dense_{i}"] = {"kernel": data[f"{prefix}/kernel"], "bias": data[f"{prefix}/bias"]}
    params[f"Dense_{n_hidden}"] = {
        "kernel": data[f"init/{head}/Dense_0/kernel"],
        "bias": data[f"init/{head}/Dense_0/bias"],
    }
    if with_log_std:
        params["log_std"] = data["init/log_std"]
    return jax.tree.map(jnp.asarray, params)


def ours(tree: dict, tower: str, head: str) -> dict[str, np.ndarray]:
    n_hidden = len(tree) - 1 - ("log_std" in tree)
    out = {}
    for i in range(n_hidden):
        for leaf in ("kernel", "bias"):
            out[f"{tower}/OrthoDense_{i}/Dense_0/{leaf}"] = np.asarray(tree[f"Dense_{i}"][leaf])
    for leaf in ("kernel", "bias"):
        out[f"{head}/Dense_0/{leaf}"] = np.asarray(tree[f"Dense_{n_hidden}"][leaf])
    if "log_std" in tree:
        out["log_std"] = np.asarray(tree["log_std"])
    return out


def step(data) -> dict[str, np.ndarray]:
    discrete = bool(data["discrete"])
    n_actions = int(data["n_actions"])
    actor = Actor(
        action_dim=n_actions,
        net_arch=[int(w) for w in data["net_arch/pi"]],
        num_discrete_choices=n_actions if discrete else None,
    )
    critic = Critic(net_arch=[int(w) for w in data["net_arch/vf"]])
    actor_params = sbx_params(data, "pi", "action_head", not discrete)
    critic_params = sbx_params(data, "vf", "value_head", False)
    actor_state = TrainState.create(apply_fn=actor.apply, params={"params": actor_params}, tx=SGD)
    vf_state = TrainState.create(apply_fn=critic.apply, params={"params": critic_params}, tx=SGD)
    actions = data["batch/action"].astype(np.int32) if discrete else data["batch/action"]
    (actor_state, vf_state), (_, policy_loss, entropy_loss, vf_loss, _) = PPO._one_update(
        actor_state=actor_state,
        vf_state=vf_state,
        observations=data["batch/obs"],
        actions=actions,
        advantages=data["batch/advantage"],
        returns=data["batch/returns"],
        old_log_prob=data["batch/old_log_prob"],
        clip_range=float(data["clip_range"]),
        ent_coef=float(data["ent_coef"]),
        vf_coef=float(data["vf_coef"]),
        normalize_advantage=bool(data["normalize_advantage"]),
    )
    after = {
        **ours(actor_state.params["params"], "pi", "action_head"),
        **ours(vf_state.params["params"], "vf", "value_head"),
    }
    before = {k.removeprefix("init/"): v for k, v in data.items() if k.startswith("init/")}
    return {
        **{f"grad/{name}": before[name] - after[name] for name in after},
        "loss/policy_gradient": np.asarray(policy_loss),
        "loss/entropy": np.asarray(entropy_loss),
        "loss/value_times_vf_coef": np.asarray(vf_loss),
    }


if __name__ == "__main__":
    for given, out in zip(sys.argv[1::2], sys.argv[2::2], strict=True):
        np.savez(out, **step(dict(np.load(given))))
