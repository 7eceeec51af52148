"""PPO's and A2C's hyperparameter keys as RL Zoo's ppo.yml and a2c.yml write them, read into a checked
PPOConfig, and written back (config.yml, checkpoints): build_config(config_to_hyperparams(cfg)) == cfg; and
the Algorithm values of both: on-policy learners that act in Box and Discrete action spaces.

A2C is PPO with A2C's preset (rlbench.algos.ppo.config): its file keys `use_rms_prop`, `rms_prop_eps`
select the optimizer, and a2c.yml's entries set no batch_size or n_epochs (one full-rollout step).
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from typing import Any

from rlbench.algos.common.schedules import LinearSchedule, Schedule
from rlbench.algos.ppo.config import PPOConfig, a2c_config
from rlbench.algos.ppo.learner import make_learner
from rlbench.config.algorithm import Algorithm
from rlbench.config.algorithms.shared import KeySet, checked_policy_kwargs, extractor_kwargs, read_features
from rlbench.config.values import layer_widths, literal_mapping, number, parse_activation, parse_schedule
from rlbench.errors import ConfigError
from rlbench.networks.actor_critic import ActorCriticNetConfig
from rlbench.networks.nature_cnn import Features, policy_name

COMMON_KEYS = (
    "learning_rate",
    "n_steps",
    "gamma",
    "gae_lambda",
    "ent_coef",
    "vf_coef",
    "max_grad_norm",
    "normalize_advantage",
    "policy",
    "policy_kwargs",
    "use_sde",
    "sde_sample_freq",
)
POLICY_KWARGS = (
    "net_arch",
    "activation_fn",
    "ortho_init",
    "log_std_init",
    "share_features_extractor",
    "features_extractor_kwargs",
    "normalize_images",
    "optimizer_class",
    "optimizer_kwargs",
)
PPO_KEYS = KeySet(
    keys=(*COMMON_KEYS, "batch_size", "n_epochs", "clip_range", "clip_range_vf", "target_kl"),
    policy_kwargs=POLICY_KWARGS,
)
A2C_KEYS = KeySet(keys=(*COMMON_KEYS, "use_rms_prop", "rms_prop_eps"), policy_kwargs=POLICY_KWARGS)
# What a resume cannot change: the saved parameters' shapes.
ARCHITECTURE_KEYS = ("net_arch", "activation_fn", "features_extractor_kwargs")


def read_ppo(params: Mapping[str, Any], n_envs: int, where: str) -> PPOConfig:
    """A checked PPOConfig from the learner keys of a merged ppo.yml entry (ConfigError, exit 2, naming the key)."""
    kwargs = checked_policy_kwargs(params, PPO_KEYS, where)
    values = read_common(params, kwargs, n_envs, where)
    for key, low in (("batch_size", 1), ("n_epochs", 1)):
        if key in params:
            values[key] = number(params, key, int, low)
    if "clip_range" in params:
        values["clip_range"] = parse_schedule("clip_range", params["clip_range"])
    if params.get("clip_range_vf") is not None:
        values["clip_range_vf"] = parse_schedule("clip_range_vf", params["clip_range_vf"])
    if params.get("target_kl") is not None:
        values["target_kl"] = number(params, "target_kl", float, 0, low_open=True)
    return checked(PPOConfig(**values), where)


def read_a2c(params: Mapping[str, Any], n_envs: int, where: str) -> PPOConfig:
    """A checked A2C config (a PPOConfig with A2C's preset) from the learner keys of a merged a2c.yml entry."""
    kwargs = checked_policy_kwargs(params, A2C_KEYS, where)
    values = read_common(params, kwargs, n_envs, where)
    if "optimizer" not in values:  # as SB3's A2C: a policy_kwargs.optimizer_class replaces use_rms_prop's RMSprop
        if "use_rms_prop" in params:
            values["optimizer"] = "rmsprop" if boolean(params, "use_rms_prop") else "adam"
        if "rms_prop_eps" in params:
            values["optimizer_eps"] = number(params, "rms_prop_eps", float, 0, low_open=True)
    return checked(a2c_config(**values), where)


# SB3's RMSpropTFLike's defaults (stable_baselines3.common.sb2_compat.rmsprop_tf_like).
RMSPROP_TF_DEFAULTS = {"alpha": 0.99, "eps": 1e-8}


def read_optimizer_class(kwargs: Mapping[str, Any]) -> dict[str, Any]:
    """policy_kwargs.optimizer_class (RMSpropTFLike, as RL Zoo's A2C atari entry names it) and its optimizer_kwargs
    (alpha, eps); nothing when no class is named (optimizer_kwargs then alone is refused: SB3's A2C drops them)."""
    name, optimizer_kwargs = kwargs.get("optimizer_class"), kwargs.get("optimizer_kwargs")
    if name is None:
        if optimizer_kwargs is not None:
            raise ConfigError("policy_kwargs.optimizer_kwargs: read only with optimizer_class=RMSpropTFLike")
        return {}
    if name != "RMSpropTFLike":
        raise ConfigError(f"policy_kwargs.optimizer_class: only RMSpropTFLike (SB3's sb2_compat) is read, got {name!r}")
    given = literal_mapping(optimizer_kwargs, "policy_kwargs.optimizer_kwargs")
    if set(given) - set(RMSPROP_TF_DEFAULTS):
        raise ConfigError(f"policy_kwargs.optimizer_kwargs: RMSpropTFLike reads alpha and eps, got {sorted(given)}")
    settings = RMSPROP_TF_DEFAULTS | given
    alpha = number(settings, "alpha", float, 0, 1, high_open=True)
    return {"optimizer": "rmsprop_tf", "rms_prop_alpha": alpha, "optimizer_eps": number(settings, "eps", float, 0)}


def read_common(params: Mapping[str, Any], kwargs: Mapping[str, Any], n_envs: int, where: str) -> dict[str, Any]:
    """The keys PPO and A2C share."""
    network = read_network(kwargs, read_features(params, kwargs, where))
    values: dict[str, Any] = {"rollout_envs": n_envs, "network": network, **read_optimizer_class(kwargs)}
    if "learning_rate" in params:
        values["learning_rate"] = parse_schedule("learning_rate", params["learning_rate"])
    if "n_steps" in params:
        values["n_steps"] = number(params, "n_steps", int, 1)
    for key in ("gamma", "gae_lambda"):
        if key in params:
            values[key] = number(params, key, float, 0, 1)
    for key in ("ent_coef", "vf_coef", "max_grad_norm"):
        if key in params:
            values[key] = number(params, key, float, 0)
    for key in ("normalize_advantage", "use_sde"):
        if key in params:
            values[key] = boolean(params, key)
    if values.get("use_sde") and params.get("sde_sample_freq") is not None:  # SB3 reads it only with use_sde
        values["sde_sample_freq"] = number(params, "sde_sample_freq", int, -1)
    return values


def read_network(kwargs: Mapping[str, Any], features: Features) -> ActorCriticNetConfig:
    """SB3's ActorCriticPolicy's policy_kwargs: net_arch (dict(pi=[64, 64], vf=[64, 64]) by default, [] after
    CnnPolicy's NatureCNN), activation_fn, ortho_init, log_std_init; one features extractor for both networks."""
    default = ActorCriticNetConfig()
    default_arch = {"pi": list(default.pi), "vf": list(default.vf)} if features.extractor == "flatten" else []
    pi, vf = parse_actor_critic_arch(kwargs.get("net_arch", default_arch))
    if kwargs.get("share_features_extractor", True) is not True:
        # Flatten has no parameters, so shared or not the networks are the same; NatureCNN's are shared (SB3's
        # default for PPO and A2C). Anything but True is refused rather than silently read.
        raise ConfigError("policy_kwargs.share_features_extractor: only True (the default) is read")
    return ActorCriticNetConfig(
        features=features,
        pi=pi,
        vf=vf,
        activation=parse_activation(kwargs.get("activation_fn", default.activation)),
        ortho_init=boolean(kwargs, "ortho_init", default.ortho_init),
        log_std_init=number({"log_std_init": kwargs.get("log_std_init", default.log_std_init)}, "log_std_init", float),
    )


def parse_actor_critic_arch(value: object) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """SB3's on-policy net_arch: a list (both networks), dict(pi=[...], vf=[...]), or the older list-wrapped
    [dict(pi=[...], vf=[...])] -> (policy widths, value widths)."""
    if isinstance(value, list | tuple) and len(value) == 1 and isinstance(value[0], Mapping):
        value = value[0]
    if isinstance(value, Mapping):
        if set(value) != {"pi", "vf"}:
            raise ConfigError(f"net_arch: a dict needs exactly the keys pi and vf, got {sorted(value)}")
        return layer_widths(value["pi"], "['pi']"), layer_widths(value["vf"], "['vf']")
    shared = layer_widths(value, "")
    return shared, shared


def boolean(params: Mapping[str, Any], key: str, default: bool | None = None) -> bool:
    value = params.get(key, default)
    if not isinstance(value, bool):
        raise ConfigError(f"{key}: expected True or False, got {value!r}")
    return value


def checked(cfg: PPOConfig, where: str) -> PPOConfig:
    """What no single key shows: the rollout against the minibatch, advantage normalization of one sample."""
    rollout = cfg.n_steps * cfg.rollout_envs
    if cfg.batch_size is not None and cfg.batch_size > rollout:
        raise ConfigError(
            f"batch_size: {cfg.batch_size} is larger than the rollout's n_steps x n_envs = {cfg.n_steps} x "
            f"{cfg.rollout_envs} = {rollout} samples (from {where})"
        )
    if cfg.batch_size is not None and rollout % cfg.batch_size:
        warnings.warn(  # SB3's warning: the last minibatch of each epoch is smaller than the others
            f"batch_size: {cfg.batch_size} does not divide the rollout's n_steps x n_envs = {rollout} samples: "
            f"each epoch ends with a minibatch of {rollout % cfg.batch_size} (from {where})",
            stacklevel=3,
        )
    if rollout == 1 and cfg.normalize_advantage:
        raise ConfigError(
            f"n_steps x n_envs = 1 with normalize_advantage: one sample has no std; raise n_steps or set "
            f"normalize_advantage: False (from {where})"
        )
    return cfg


def schedule_as_text(schedule: Schedule) -> float | str:
    return f"lin_{schedule.start}" if isinstance(schedule, LinearSchedule) else schedule.value


def ppo_hyperparams(cfg: PPOConfig) -> dict[str, Any]:
    """The inverse of read_ppo, in the file format: what config.yml stores, sorted."""
    out = common_hyperparams(cfg) | {
        "batch_size": cfg.batch_size,
        "n_epochs": cfg.n_epochs,
        "clip_range": schedule_as_text(cfg.clip_range),
        "clip_range_vf": None if cfg.clip_range_vf is None else schedule_as_text(cfg.clip_range_vf),
        "target_kl": cfg.target_kl,
    }
    return dict(sorted(out.items()))


def a2c_hyperparams(cfg: PPOConfig) -> dict[str, Any]:
    """The inverse of read_a2c, in the file format."""
    out = common_hyperparams(cfg) | {"use_rms_prop": cfg.optimizer != "adam", "rms_prop_eps": cfg.optimizer_eps}
    return dict(sorted(out.items()))


def common_hyperparams(cfg: PPOConfig) -> dict[str, Any]:
    net = cfg.network
    return {
        "learning_rate": schedule_as_text(cfg.learning_rate),
        "n_steps": cfg.n_steps,
        "gamma": cfg.gamma,
        "gae_lambda": cfg.gae_lambda,
        "ent_coef": cfg.ent_coef,
        "vf_coef": cfg.vf_coef,
        "max_grad_norm": cfg.max_grad_norm,
        "normalize_advantage": cfg.normalize_advantage,
        "use_sde": cfg.use_sde,
        "sde_sample_freq": cfg.sde_sample_freq,
        "policy": policy_name(net.features),
        "policy_kwargs": {
            "net_arch": {"pi": list(net.pi), "vf": list(net.vf)},
            "activation_fn": net.activation,
            "ortho_init": net.ortho_init,
            "log_std_init": net.log_std_init,
        }
        | extractor_kwargs(net.features)
        | optimizer_class(cfg),
    }


def optimizer_class(cfg: PPOConfig) -> dict[str, Any]:
    """RMSpropTFLike as policy_kwargs name it; nothing for the optimizers the other keys choose."""
    if cfg.optimizer != "rmsprop_tf":
        return {}
    settings = {"alpha": cfg.rms_prop_alpha, "eps": cfg.optimizer_eps}
    return {"optimizer_class": "RMSpropTFLike", "optimizer_kwargs": settings}


ON_POLICY_SPACES = ("Box", "Discrete")
PPO = Algorithm(
    "ppo", PPO_KEYS, read_ppo, ppo_hyperparams, make_learner,
    architecture_keys=ARCHITECTURE_KEYS, action_spaces=ON_POLICY_SPACES, reads_images=True, log_interval=1,
    inline_cpu_calls=True,
)  # fmt: skip
A2C = Algorithm(
    "a2c", A2C_KEYS, read_a2c, a2c_hyperparams, make_learner,
    architecture_keys=ARCHITECTURE_KEYS, action_spaces=ON_POLICY_SPACES, reads_images=True, log_interval=100,
    inline_cpu_calls=True,
)  # fmt: skip
