"""Run by the SBX peer's Python (not rlbench's): one gradient step of SBX's own SAC, TQC, CrossQ or TD3 update
functions on the parameters (and BatchRenorm statistics), batch and Gaussian noise an npz file gives, with
SGD at learning rate 1 in place of Adam, so that each parameter's change is minus its gradient. Writes the
changes, the new target critics or statistics and the losses to a second npz, under rlbench's names.
Usage: python sbx_step.py sac|tqc|crossq|td3 IN.npz OUT.npz [ALGO IN.npz OUT.npz ...]

Written against SBX 0.28 (SAC and CrossQ: one vmapped critic state; TQC: two critic states; update
functions with per-sample discounts; Flax names Dense_i, BatchRenorm_i); an SBX whose API moved fails here
by name. rlbench's names differ only in where the layers sit: trunk/ for the hidden layers, mean and
log_std for the actor's heads, critics/ and q for the critics'.
"""

import sys

import gymnasium as gym
import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import traverse_util
from sbx import SAC, TD3, TQC, CrossQ

SGD = optax.sgd(1.0)  # new = old - gradient


class BoxEnv(gym.Env):
    """Only the spaces of the batch's env: SBX builds its networks from them."""

    def __init__(self, obs_dim: int, action_dim: int):
        self.observation_space = gym.spaces.Box(-np.inf, np.inf, (obs_dim,), np.float32)
        self.action_space = gym.spaces.Box(-1.0, 1.0, (action_dim,), np.float32)


def sbx_name(ours: str, heads: dict[str, str], scope: str = "") -> str:
    """rlbench's flat name -> SBX's: the trunk's layers keep their names, the heads are SBX's next Dense_i."""
    path = ours.removeprefix("critics/").removeprefix("trunk/")
    layer, leaf = path.split("/")
    return f"{scope}{heads.get(layer, layer)}/{leaf}"


class Names:
    """rlbench's flat names of one network (those of the npz under `prefix`) and SBX's for them."""

    def __init__(self, data, prefix: str, heads: dict[str, str], scope: str = ""):
        self.ours = sorted(k.removeprefix(prefix + "/") for k in data if k.startswith(prefix + "/"))
        self.theirs = {o: sbx_name(o, heads, scope) for o in self.ours}

    def tree(self, data, prefix: str, pick=lambda x: x):
        """SBX's tree of the npz's arrays under `prefix` (pick: one critic of rlbench's ensemble)."""
        flat = {self.theirs[o]: jnp.asarray(pick(data[f"{prefix}/{o}"])) for o in self.ours}
        return traverse_util.unflatten_dict(flat, sep="/")

    def flat(self, tree, prefix: str) -> dict[str, np.ndarray]:
        """rlbench's flat names -> arrays of SBX's `tree`."""
        theirs = traverse_util.flatten_dict(tree, sep="/")
        return {f"{prefix}/{o}": np.asarray(theirs[self.theirs[o]]) for o in self.ours}


def with_sgd(state, params, **fields):
    sbx_shapes = jax.tree.map(lambda x: tuple(np.shape(x)), dict(state.params))
    if sbx_shapes != jax.tree.map(lambda x: tuple(x.shape), params):
        sys.exit(f"SBX's parameters are not laid out as this script expects: {sbx_shapes}")
    return state.replace(params=params, tx=SGD, opt_state=SGD.init(params), **fields)


def with_stats(state, names, data, prefix):
    """SBX's batch statistics with the npz's mean, var and steps (r_max and d_max stay SBX's own)."""
    given = traverse_util.flatten_dict(names.tree(data, prefix), sep="/")
    stats = traverse_util.flatten_dict(dict(state.batch_stats), sep="/")
    missing = set(given) - set(stats)
    if missing:
        sys.exit(f"SBX's batch statistics lack {sorted(missing)}")
    stats.update({k: v.astype(jnp.asarray(stats[k]).dtype) for k, v in given.items()})
    return state.replace(batch_stats=traverse_util.unflatten_dict(stats, sep="/"))


def minus(before, after):
    return jax.tree.map(lambda a, b: a - b, before, after)


def given_noise(data):
    """jax.random.normal handing out the npz's draws in order: a' ~ pi(.|s') for the target, then a ~ pi(.|s)
    for the actor (SAC's family), or TD3's one target smoothing draw. tfp's MultivariateNormalDiag draws
    [action_dim, batch] and transposes; TD3 draws [batch, action_dim]."""
    noise = [data[k] for k in ("noise/critic", "noise/actor") if k in data]

    def normal(key, shape=(), dtype=jnp.float32, *args, **kwargs):
        if not noise:
            sys.exit(f"SBX drew more Gaussian samples than given (shape {shape})")
        draw = noise.pop(0)
        if tuple(shape) == draw.T.shape != draw.shape:
            return jnp.asarray(draw.T, dtype)
        if tuple(shape) != draw.shape:
            sys.exit(f"SBX drew Gaussian noise of shape {shape}, expected {draw.shape}")
        return jnp.asarray(draw, dtype)

    return normal, noise


def heads(data, prefix):
    """The output layers (SAC's mean and log_std, TD3's mu, the critics' q): SBX's Dense after the hidden ones."""
    n_hidden = len({k for k in data if k.startswith(prefix + "/") and "/Dense_" in k}) // 2
    return {
        "mean": f"Dense_{n_hidden}",
        "log_std": f"Dense_{n_hidden + 1}",
        "mu": f"Dense_{n_hidden}",
        "q": f"Dense_{n_hidden}",
    }


def temperature_state(model, data):
    log_alpha = jax.tree.map(lambda x: jnp.asarray(data["init/log_alpha"], x.dtype), model.ent_coef_state.params)
    return with_sgd(model.ent_coef_state, log_alpha)


def common_out(actor_names, actor_gradient, temperature, temperature1, losses):
    return {
        **actor_names.flat(actor_gradient, "grad/actor"),
        "grad/log_alpha": jax.tree.leaves(temperature.params)[0] - jax.tree.leaves(temperature1.params)[0],
        **dict(zip(("loss/critic", "loss/actor", "loss/temperature"), losses, strict=True)),
    }


def discounts(data, b):
    return jnp.full(b["reward"].shape, float(data["gamma"]), jnp.float32)


def sac_step(model, data, b, key):
    scope = "VmapContinuousCritic_0/"  # SBX's SAC: both critics in one vmapped module
    actor_names = Names(data, "init/actor", heads(data, "init/actor"))
    critic_names = Names(data, "init/critic", heads(data, "init/critic"), scope)
    actor = with_sgd(model.policy.actor_state, {"params": actor_names.tree(data, "init/actor")})
    critic = with_sgd(
        model.policy.qf_state,
        {"params": critic_names.tree(data, "init/critic")},
        target_params={"params": critic_names.tree(data, "init/target")},
    )
    temperature = temperature_state(model, data)
    critic1, (critic_loss, _), key = SAC.update_critic(
        actor, critic, temperature, b["obs"], b["action"], b["next_obs"], b["reward"], b["terminated"],
        discounts(data, b), key,
    )  # fmt: skip
    critic1 = SAC.soft_update(float(data["tau"]), critic1)
    actor1, critic1, temperature1, actor_loss, temperature_loss, _ = SAC.update_actor_and_temperature(
        actor, critic1, temperature, b["obs"], model.target_entropy, key
    )
    return {
        **critic_names.flat(minus(critic.params, critic1.params)["params"], "grad/critic"),
        **critic_names.flat(critic1.target_params["params"], "after/target"),
        **common_out(
            actor_names,
            minus(actor.params, actor1.params)["params"],
            temperature,
            temperature1,
            (critic_loss, actor_loss, temperature_loss),
        ),
    }


def tqc_step(model, data, b, key):
    """SBX's TQC keeps each critic in a state of its own (qf1, qf2) with a loss of its own; rlbench's
    ensemble is one state whose loss is their mean. Written out here as rlbench's [2, ...] leaves."""
    actor_names = Names(data, "init/actor", heads(data, "init/actor"))
    critic_names = Names(data, "init/critic", heads(data, "init/critic"))

    def member(i):
        pick = lambda x: x[i]  # noqa: E731
        return with_sgd(
            getattr(model.policy, f"qf{i + 1}_state"),
            {"params": critic_names.tree(data, "init/critic", pick)},
            target_params={"params": critic_names.tree(data, "init/target", pick)},
        )

    actor = with_sgd(model.policy.actor_state, {"params": actor_names.tree(data, "init/actor")})
    qf1, qf2 = member(0), member(1)
    temperature = temperature_state(model, data)
    (qf1_1, qf2_1), (loss1, loss2, _), key = TQC.update_critic(
        model.policy.n_target_quantiles, actor, qf1, qf2, temperature, b["obs"], b["action"], b["next_obs"],
        b["reward"], b["terminated"], discounts(data, b), key,
    )  # fmt: skip
    qf1_1, qf2_1 = TQC.soft_update(float(data["tau"]), qf1_1, qf2_1)
    actor1, (qf1_1, qf2_1), temperature1, actor_loss, temperature_loss, _ = TQC.update_actor_and_temperature(
        actor, qf1_1, qf2_1, temperature, b["obs"], model.target_entropy, key
    )
    stack = lambda a, b: jax.tree.map(lambda x, y: jnp.stack([x, y]), a["params"], b["params"])  # noqa: E731
    gradient = minus(stack(qf1.params, qf2.params), stack(qf1_1.params, qf2_1.params))
    losses = ((loss1 + loss2) / 2, actor_loss, temperature_loss)
    return {
        **critic_names.flat(gradient, "grad/critic"),
        **critic_names.flat(stack(qf1_1.target_params, qf2_1.target_params), "after/target"),
        **common_out(actor_names, minus(actor.params, actor1.params)["params"], temperature, temperature1, losses),
    }


def crossq_step(model, data, b, key):
    """No target critic; BatchRenorm statistics in both networks, compared after the step. SBX's
    BatchNormTrainState keeps the parameters without Flax's "params" level (the statistics beside them)."""
    scope = "VmapCritic_0/"
    actor_names = Names(data, "init/actor", heads(data, "init/actor"))
    critic_names = Names(data, "init/critic", heads(data, "init/critic"), scope)
    actor_stats = Names(data, "init/actor_stats", {})
    critic_stats = Names(data, "init/critic_stats", {}, scope)
    actor = with_sgd(model.policy.actor_state, actor_names.tree(data, "init/actor"))
    actor = with_stats(actor, actor_stats, data, "init/actor_stats")
    critic = with_sgd(model.policy.qf_state, critic_names.tree(data, "init/critic"))
    critic = with_stats(critic, critic_stats, data, "init/critic_stats")
    temperature = temperature_state(model, data)
    critic1, (critic_loss, _), key = CrossQ.update_critic(
        actor, critic, temperature, b["obs"], b["action"], b["next_obs"], b["reward"], b["terminated"],
        discounts(data, b), key,
    )  # fmt: skip
    actor1, critic1, temperature1, actor_loss, temperature_loss, _ = CrossQ.update_actor_and_temperature(
        actor, critic1, temperature, b["obs"], model.target_entropy, key
    )
    return {
        **critic_names.flat(minus(critic.params, critic1.params), "grad/critic"),
        **critic_stats.flat(critic1.batch_stats, "after/critic_stats"),
        **actor_stats.flat(actor1.batch_stats, "after/actor_stats"),
        **common_out(
            actor_names,
            minus(actor.params, actor1.params),
            temperature,
            temperature1,
            (critic_loss, actor_loss, temperature_loss),
        ),
    }


def td3_step(model, data, b, key):
    """SBX's TD3 step as its _train runs it: critic, then the Polyak update of both targets, then the actor
    (on the steps policy_delay picks; here one that does)."""
    scope = "VmapContinuousCritic_0/"
    actor_names = Names(data, "init/actor", heads(data, "init/actor"))
    critic_names = Names(data, "init/critic", heads(data, "init/critic"), scope)
    actor = with_sgd(
        model.policy.actor_state,
        {"params": actor_names.tree(data, "init/actor")},
        target_params={"params": actor_names.tree(data, "init/actor_target")},
    )
    critic = with_sgd(
        model.policy.qf_state,
        {"params": critic_names.tree(data, "init/critic")},
        target_params={"params": critic_names.tree(data, "init/target")},
    )
    critic1, critic_loss, key = TD3.update_critic(
        actor, critic, b["obs"], b["action"], b["next_obs"], b["reward"], b["terminated"], discounts(data, b),
        float(data["target_policy_noise"]), float(data["target_noise_clip"]), key,
    )  # fmt: skip
    critic1, actor_moved = TD3.soft_update(float(data["tau"]), critic1, actor)
    actor1, critic1, actor_loss, _ = TD3.update_actor(actor_moved, critic1, b["obs"], key)
    return {
        **critic_names.flat(minus(critic.params, critic1.params)["params"], "grad/critic"),
        **critic_names.flat(critic1.target_params["params"], "after/target"),
        **actor_names.flat(minus(actor.params, actor1.params)["params"], "grad/actor"),
        **actor_names.flat(actor1.target_params["params"], "after/actor_target"),
        "loss/critic": critic_loss,
        "loss/actor": actor_loss,
    }


STEPS = {
    "sac": (SAC, sac_step),
    "tqc": (TQC, tqc_step),
    "crossq": (CrossQ, crossq_step),
    "td3": (TD3, td3_step),
}


def main(*triples):
    """Each (algo, IN.npz, OUT.npz) in turn, in one process; one model per algorithm and widths (building
    one compiles its initialisation op by op: seconds each)."""
    models = {}
    for algo, source, target in zip(triples[0::3], triples[1::3], triples[2::3], strict=True):
        data = dict(np.load(source))
        widths = {k: tuple(int(w) for w in data[f"net_arch/{k}"]) for k in ("pi", "qf")}
        shape = (algo, data["batch/obs"].shape[1], data["noise/critic"].shape[1], widths["pi"], widths["qf"])
        if shape not in models:
            models[shape] = STEPS[algo][0](
                "MlpPolicy",
                BoxEnv(*shape[1:3]),
                seed=0,
                learning_starts=0,
                policy_kwargs={"net_arch": {k: list(v) for k, v in widths.items()}},
            )
        one_step(algo, models[shape], data, target)


def one_step(algo, model, data, target):
    algorithm, step = STEPS[algo]
    b = {k.removeprefix("batch/"): jnp.asarray(v) for k, v in data.items() if k.startswith("batch/")}
    normal, noise = given_noise(data)
    # SBX's update functions are jitted: traced afresh (no step of an earlier case cached), the draws
    # become constants of the compiled step.
    for name in ("update_critic", "update_actor", "update_temperature", "soft_update"):
        if hasattr(algorithm, name):
            getattr(algorithm, name).clear_cache()
    real_normal, jax.random.normal = jax.random.normal, normal
    out = step(model, data, b, jax.random.PRNGKey(0))
    jax.random.normal = real_normal
    if noise:
        sys.exit("SBX's step drew fewer Gaussian samples than given")
    np.savez(target, **{k: np.asarray(v) for k, v in out.items()})


if __name__ == "__main__":
    main(*sys.argv[1:])
