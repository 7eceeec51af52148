"""Run by the SBX peer's Python (not rlbench's): one SAC gradient step of SBX's own update functions on the
parameters, batch and Gaussian noise an npz file gives, with SGD at learning rate 1 in place of Adam, so
that each parameter's change is minus its gradient. Writes the changes, the new target critic and the
losses to a second npz. Usage: python sbx_sac_step.py INPUT.npz OUTPUT.npz

Written against SBX 0.28's SAC (update_critic with per-sample discounts, soft_update,
update_actor_and_temperature; Flax names Dense_i); an SBX whose API moved fails here by name."""

import sys

import gymnasium as gym
import jax
import jax.numpy as jnp
import numpy as np
import optax
from sbx import SAC

ACTOR_LAYERS = {"Dense_0": "trunk/Dense_0", "Dense_1": "trunk/Dense_1", "Dense_2": "mean", "Dense_3": "log_std"}
CRITIC_LAYERS = {"Dense_0": "critics/trunk/Dense_0", "Dense_1": "critics/trunk/Dense_1", "Dense_2": "critics/q"}
CRITIC_SCOPE = "VmapContinuousCritic_0"


class BoxEnv(gym.Env):
    """Only the spaces of the batch's env: SBX builds its networks from them."""

    def __init__(self, obs_dim: int, action_dim: int):
        self.observation_space = gym.spaces.Box(-np.inf, np.inf, (obs_dim,), np.float32)
        self.action_space = gym.spaces.Box(-1.0, 1.0, (action_dim,), np.float32)


def layers(data, prefix, names):
    return {
        sbx: {leaf: jnp.asarray(data[f"{prefix}/{ours}/{leaf}"]) for leaf in ("kernel", "bias")}
        for sbx, ours in names.items()
    }


def check_like(mine, sbx_params, what):
    shapes = jax.tree.map(lambda x: tuple(x.shape), (dict(sbx_params), mine))
    if jax.tree.structure(shapes[0]) != jax.tree.structure(shapes[1]) or shapes[0] != shapes[1]:
        sys.exit(f"SBX's {what} parameters are not laid out as this script expects: {shapes[0]}")


def main(source, target):
    data = dict(np.load(source))
    batch_size, action_dim = data["noise/critic"].shape
    model = SAC("MlpPolicy", BoxEnv(data["batch/obs"].shape[1], action_dim), seed=0, learning_starts=0)
    sgd = optax.sgd(1.0)  # new = old - gradient

    actor_params = {"params": layers(data, "init/actor", ACTOR_LAYERS)}
    critic_params = {"params": {CRITIC_SCOPE: layers(data, "init/critic", CRITIC_LAYERS)}}
    check_like(actor_params, model.policy.actor_state.params, "actor")
    check_like(critic_params, model.policy.qf_state.params, "critic")
    actor = model.policy.actor_state.replace(params=actor_params, tx=sgd, opt_state=sgd.init(actor_params))
    critic = model.policy.qf_state.replace(
        params=critic_params,
        target_params={"params": {CRITIC_SCOPE: layers(data, "init/target", CRITIC_LAYERS)}},
        tx=sgd,
        opt_state=sgd.init(critic_params),
    )
    log_alpha = jax.tree.map(lambda x: jnp.asarray(data["init/log_alpha"], x.dtype), model.ent_coef_state.params)
    temperature = model.ent_coef_state.replace(params=log_alpha, tx=sgd, opt_state=sgd.init(log_alpha))

    # The two Gaussian draws of a step (a' ~ pi(.|s') for the target, then a ~ pi(.|s) for the actor), in
    # order. tfp's MultivariateNormalDiag draws them [action_dim, batch] and transposes.
    noise = [data["noise/critic"], data["noise/actor"]]

    def given_normal(key, shape=(), dtype=jnp.float32, *args, **kwargs):
        if tuple(shape) != (action_dim, batch_size):
            sys.exit(f"SBX drew Gaussian noise of shape {shape}, expected {(action_dim, batch_size)}")
        return jnp.asarray(noise.pop(0).T, dtype)

    b = {k.removeprefix("batch/"): jnp.asarray(v) for k, v in data.items() if k.startswith("batch/")}
    gamma, tau = float(data["gamma"]), float(data["tau"])
    jax.random.normal = given_normal
    with jax.disable_jit():
        critic1, (critic_loss, _), key = SAC.update_critic(
            actor, critic, temperature, b["obs"], b["action"], b["next_obs"], b["reward"], b["terminated"],
            jnp.full((batch_size,), gamma, jnp.float32), jax.random.PRNGKey(0),
        )  # fmt: skip
        critic1 = SAC.soft_update(tau, critic1)
        actor1, critic1, temperature1, actor_loss, temperature_loss, _ = SAC.update_actor_and_temperature(
            actor, critic1, temperature, b["obs"], -float(action_dim), key
        )
    if noise:
        sys.exit("SBX's step drew fewer Gaussian samples than the two expected")

    out = {
        "loss/critic": critic_loss,
        "loss/actor": actor_loss,
        "loss/temperature": temperature_loss,
        "grad/log_alpha": jax.tree.leaves(temperature.params)[0] - jax.tree.leaves(temperature1.params)[0],
    }
    for before, after, prefix, names in [
        (critic.params["params"][CRITIC_SCOPE], critic1.params["params"][CRITIC_SCOPE], "grad/critic", CRITIC_LAYERS),
        (actor.params["params"], actor1.params["params"], "grad/actor", ACTOR_LAYERS),
    ]:
        for sbx, ours in names.items():
            for leaf in ("kernel", "bias"):
                out[f"{prefix}/{ours}/{leaf}"] = before[sbx][leaf] - after[sbx][leaf]
    for sbx, ours in CRITIC_LAYERS.items():
        for leaf in ("kernel", "bias"):
            out[f"after/target/{ours}/{leaf}"] = critic1.target_params["params"][CRITIC_SCOPE][sbx][leaf]
    np.savez(target, **{k: np.asarray(v) for k, v in out.items()})


if __name__ == "__main__":
    main(*sys.argv[1:])
