"""Run by the SBX peer's Python (not rlbench's): one gradient step of SBX's own SAC or TQC update functions
on the parameters, batch and Gaussian noise an npz file gives, with SGD at learning rate 1 in place of Adam,
so that each parameter's change is minus its gradient. Writes the changes, the new target critics and the
losses to a second npz, named as rlbench's parameters are. Usage: python sbx_step.py sac|tqc IN.npz OUT.npz

Written against SBX 0.28 (SAC: one vmapped critic state; TQC: two critic states; update functions with
per-sample discounts; Flax names Dense_i); an SBX whose API moved fails here by name."""

import sys

import gymnasium as gym
import jax
import jax.numpy as jnp
import numpy as np
import optax
from sbx import SAC, TQC

ACTOR_LAYERS = {"Dense_0": "trunk/Dense_0", "Dense_1": "trunk/Dense_1", "Dense_2": "mean", "Dense_3": "log_std"}
CRITIC_LAYERS = {"Dense_0": "critics/trunk/Dense_0", "Dense_1": "critics/trunk/Dense_1", "Dense_2": "critics/q"}
SAC_CRITIC_SCOPE = "VmapContinuousCritic_0"  # SBX's SAC: both critics in one vmapped module
SGD = optax.sgd(1.0)  # new = old - gradient


class BoxEnv(gym.Env):
    """Only the spaces of the batch's env: SBX builds its networks from them."""

    def __init__(self, obs_dim: int, action_dim: int):
        self.observation_space = gym.spaces.Box(-np.inf, np.inf, (obs_dim,), np.float32)
        self.action_space = gym.spaces.Box(-1.0, 1.0, (action_dim,), np.float32)


def layers(data, prefix, names, member=None):
    """rlbench's parameters of these layers in SBX's names; `member`: one critic of rlbench's ensemble."""
    pick = (lambda x: x) if member is None else (lambda x: x[member])
    return {
        sbx: {leaf: jnp.asarray(pick(data[f"{prefix}/{ours}/{leaf}"])) for leaf in ("kernel", "bias")}
        for sbx, ours in names.items()
    }


def unlayers(params, prefix, names) -> dict[str, np.ndarray]:
    return {
        f"{prefix}/{ours}/{leaf}": np.asarray(params[sbx][leaf]) for sbx, ours in names.items() for leaf in params[sbx]
    }


def with_sgd(state, params, **fields):
    sbx_shapes = jax.tree.map(lambda x: tuple(x.shape), dict(state.params))
    if sbx_shapes != jax.tree.map(lambda x: tuple(x.shape), params):
        sys.exit(f"SBX's parameters are not laid out as this script expects: {sbx_shapes}")
    return state.replace(params=params, tx=SGD, opt_state=SGD.init(params), **fields)


def minus(before, after):
    return jax.tree.map(lambda a, b: a - b, before, after)


def given_noise(data, action_dim, batch_size):
    """jax.random.normal handing out the npz's two draws in order (a' ~ pi(.|s') for the target, then
    a ~ pi(.|s) for the actor). tfp's MultivariateNormalDiag draws [action_dim, batch] and transposes."""
    noise = [data["noise/critic"], data["noise/actor"]]

    def normal(key, shape=(), dtype=jnp.float32, *args, **kwargs):
        if tuple(shape) != (action_dim, batch_size):
            sys.exit(f"SBX drew Gaussian noise of shape {shape}, expected {(action_dim, batch_size)}")
        return jnp.asarray(noise.pop(0).T, dtype)

    return normal, noise


def sac_step(model, data, b, gamma, tau, key):
    actor = with_sgd(model.policy.actor_state, {"params": layers(data, "init/actor", ACTOR_LAYERS)})
    scoped = lambda prefix: {"params": {SAC_CRITIC_SCOPE: layers(data, prefix, CRITIC_LAYERS)}}  # noqa: E731
    critic = with_sgd(model.policy.qf_state, scoped("init/critic"), target_params=scoped("init/target"))
    temperature = temperature_state(model, data)
    critic1, (critic_loss, _), key = SAC.update_critic(
        actor, critic, temperature, b["obs"], b["action"], b["next_obs"], b["reward"], b["terminated"],
        jnp.full(b["reward"].shape, gamma, jnp.float32), key,
    )  # fmt: skip
    critic1 = SAC.soft_update(tau, critic1)
    actor1, critic1, temperature1, actor_loss, temperature_loss, _ = SAC.update_actor_and_temperature(
        actor, critic1, temperature, b["obs"], model.target_entropy, key
    )
    inner = lambda p: p["params"][SAC_CRITIC_SCOPE]  # noqa: E731
    return {
        **unlayers(minus(inner(critic.params), inner(critic1.params)), "grad/critic", CRITIC_LAYERS),
        **unlayers(inner(critic1.target_params), "after/target", CRITIC_LAYERS),
        **unlayers(minus(actor.params, actor1.params)["params"], "grad/actor", ACTOR_LAYERS),
        **temperature_out(temperature, temperature1),
        "loss/critic": critic_loss,
        "loss/actor": actor_loss,
        "loss/temperature": temperature_loss,
    }


def tqc_step(model, data, b, gamma, tau, key):
    """SBX's TQC keeps each critic in a state of its own (qf1, qf2) with a loss of its own; rlbench's
    ensemble is one state whose loss is their mean. Written out here as rlbench's [2, ...] leaves."""
    actor = with_sgd(model.policy.actor_state, {"params": layers(data, "init/actor", ACTOR_LAYERS)})
    member = lambda prefix, i: {"params": layers(data, prefix, CRITIC_LAYERS, i)}  # noqa: E731
    qf1 = with_sgd(model.policy.qf1_state, member("init/critic", 0), target_params=member("init/target", 0))
    qf2 = with_sgd(model.policy.qf2_state, member("init/critic", 1), target_params=member("init/target", 1))
    temperature = temperature_state(model, data)
    (qf1_1, qf2_1), (loss1, loss2, _), key = TQC.update_critic(
        model.policy.n_target_quantiles, actor, qf1, qf2, temperature, b["obs"], b["action"], b["next_obs"],
        b["reward"], b["terminated"], jnp.full(b["reward"].shape, gamma, jnp.float32), key,
    )  # fmt: skip
    qf1_1, qf2_1 = TQC.soft_update(tau, qf1_1, qf2_1)
    actor1, (qf1_1, qf2_1), temperature1, actor_loss, temperature_loss, _ = TQC.update_actor_and_temperature(
        actor, qf1_1, qf2_1, temperature, b["obs"], model.target_entropy, key
    )
    stack = lambda a, b: jax.tree.map(lambda x, y: jnp.stack([x, y]), a["params"], b["params"])  # noqa: E731
    return {
        **unlayers(
            minus(stack(qf1.params, qf2.params), stack(qf1_1.params, qf2_1.params)), "grad/critic", CRITIC_LAYERS
        ),
        **unlayers(stack(qf1_1.target_params, qf2_1.target_params), "after/target", CRITIC_LAYERS),
        **unlayers(minus(actor.params, actor1.params)["params"], "grad/actor", ACTOR_LAYERS),
        **temperature_out(temperature, temperature1),
        "loss/critic": (loss1 + loss2) / 2,
        "loss/actor": actor_loss,
        "loss/temperature": temperature_loss,
    }


def temperature_state(model, data):
    log_alpha = jax.tree.map(lambda x: jnp.asarray(data["init/log_alpha"], x.dtype), model.ent_coef_state.params)
    return with_sgd(model.ent_coef_state, log_alpha)


def temperature_out(before, after):
    return {"grad/log_alpha": jax.tree.leaves(before.params)[0] - jax.tree.leaves(after.params)[0]}


STEPS = {"sac": (SAC, sac_step), "tqc": (TQC, tqc_step)}


def main(algo, source, target):
    data = dict(np.load(source))
    batch_size, action_dim = data["noise/critic"].shape
    algorithm, step = STEPS[algo]
    model = algorithm("MlpPolicy", BoxEnv(data["batch/obs"].shape[1], action_dim), seed=0, learning_starts=0)
    b = {k.removeprefix("batch/"): jnp.asarray(v) for k, v in data.items() if k.startswith("batch/")}
    normal, noise = given_noise(data, action_dim, batch_size)
    jax.random.normal = normal
    with jax.disable_jit():
        out = step(model, data, b, float(data["gamma"]), float(data["tau"]), jax.random.PRNGKey(0))
    if noise:
        sys.exit("SBX's step drew fewer Gaussian samples than the two expected")
    np.savez(target, **{k: np.asarray(v) for k, v in out.items()})


if __name__ == "__main__":
    main(*sys.argv[1:])
