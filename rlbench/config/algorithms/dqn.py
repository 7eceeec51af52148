"""DQN's and QR-DQN's keys as RL Zoo's dqn.yml and qrdqn.yml write them, read into a checked DQNConfig and
written back (config.yml, checkpoints): build_config(config_to_hyperparams(cfg)) == cfg; and the Algorithm
values of both: value-based learners that act in Discrete action spaces.

QR-DQN is DQN's learner with quantiles (rlbench.algos.dqn.config.qrdqn_config: SB3-contrib's defaults); its
only own key is policy_kwargs.n_quantiles.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

from rlbench.algos.dqn.config import DQNConfig, EpsilonSchedule, qrdqn_config
from rlbench.algos.dqn.update import make_learner
from rlbench.config.algorithm import Algorithm
from rlbench.config.algorithms.ppo import schedule_as_text
from rlbench.config.algorithms.shared import KeySet, checked_policy_kwargs, extractor_kwargs, read_features
from rlbench.config.values import (
    layer_widths,
    number,
    parse_activation,
    parse_schedule,
    parse_train_freq,
    resolve_gradient_steps,
)
from rlbench.errors import ConfigError
from rlbench.networks.mlp import PRECISIONS, NetworkConfig
from rlbench.networks.nature_cnn import Features, policy_name

DQN_KEYS = KeySet(
    keys=(
        "learning_rate",
        "buffer_size",
        "learning_starts",
        "batch_size",
        "tau",
        "gamma",
        "train_freq",
        "gradient_steps",
        "target_update_interval",
        "exploration_fraction",
        "exploration_initial_eps",
        "exploration_final_eps",
        "max_grad_norm",
        "policy",
        "policy_kwargs",
        "precision",
    ),
    policy_kwargs=("net_arch", "activation_fn", "features_extractor_kwargs", "normalize_images"),
)
QRDQN_KEYS = DQN_KEYS.extend(policy_kwargs=("n_quantiles",))
# What a resume cannot change.
ARCHITECTURE_KEYS = ("net_arch", "activation_fn", "n_quantiles", "features_extractor_kwargs")


def reader(defaults: DQNConfig, key_set: KeySet) -> Callable[[Mapping[str, Any], int, str], DQNConfig]:
    def read(params: Mapping[str, Any], n_envs: int, where: str) -> DQNConfig:
        """A checked config from the learner keys of a merged entry (ConfigError, exit 2, naming the key)."""
        kwargs = checked_policy_kwargs(params, key_set, where)
        p = {"train_freq": defaults.train_freq, **params}
        values: dict[str, Any] = {"vector_envs": n_envs, "gradient_steps": resolve_gradient_steps(p, n_envs)}
        values["train_freq"], values["train_freq_unit"] = parse_train_freq(p)
        if "learning_rate" in p:
            values["learning_rate"] = parse_schedule("learning_rate", p["learning_rate"])
        for key, low in (("buffer_size", 1), ("learning_starts", 0), ("batch_size", 1), ("target_update_interval", 1)):
            if key in p:
                values[key] = number(p, key, int, low)
        if "gamma" in p:
            values["gamma"] = number(p, "gamma", float, 0, 1, high_open=True)
        if "tau" in p:
            values["tau"] = number(p, "tau", float, 0, 1, low_open=True)
        if "max_grad_norm" in p:
            values["max_grad_norm"] = (
                None if p["max_grad_norm"] is None else number(p, "max_grad_norm", float, 0, low_open=True)
            )
        values["exploration_schedule"] = read_exploration(p, defaults.exploration_schedule)
        values["q_network"], values["features"] = read_network(p, kwargs, defaults, where)
        if defaults.n_quantiles is not None and "n_quantiles" in kwargs:
            values["n_quantiles"] = number(kwargs, "n_quantiles", int, 1)
        return replace(defaults, **values)

    return read


def read_network(
    params: Mapping[str, Any], kwargs: Mapping[str, Any], defaults: DQNConfig, where: str
) -> tuple[NetworkConfig, Features]:
    """The Q-network's features and layers: `policy` (MlpPolicy, or CnnPolicy: NatureCNN, then net_arch, [] by
    default as SB3's), net_arch as a list of widths (SB3's DQN), activation_fn, features_extractor_kwargs'
    features_dim, precision."""
    features = read_features(params, kwargs, where)
    network = defaults.q_network
    default_hidden = network.hidden if features.extractor == "flatten" else ()
    hidden = layer_widths(kwargs["net_arch"], "") if "net_arch" in kwargs else default_hidden
    precision = params.get("precision", "float32")
    if precision not in PRECISIONS:
        raise ConfigError(f"precision: expected one of {', '.join(PRECISIONS)}, got {precision!r} (from {where})")
    activation = parse_activation(kwargs.get("activation_fn", network.activation))
    return replace(network, hidden=hidden, activation=activation, precision=precision), features


def read_exploration(params: Mapping[str, Any], default: EpsilonSchedule) -> EpsilonSchedule:
    """SB3's exploration_fraction, exploration_initial_eps and exploration_final_eps, each in [0, 1]."""
    values = {
        "fraction": ("exploration_fraction", default.fraction),
        "initial": ("exploration_initial_eps", default.initial),
        "final": ("exploration_final_eps", default.final),
    }
    read = {name: number({key: params.get(key, value)}, key, float, 0, 1) for name, (key, value) in values.items()}
    return EpsilonSchedule(**read)


def dqn_hyperparams(cfg: DQNConfig) -> dict[str, Any]:
    """The inverse of the reader, in the file format: what config.yml stores, sorted."""
    network = cfg.q_network
    policy_kwargs: dict[str, Any] = {"net_arch": list(network.hidden), "activation_fn": network.activation}
    policy_kwargs |= extractor_kwargs(cfg.features)
    if cfg.n_quantiles is not None:
        policy_kwargs["n_quantiles"] = cfg.n_quantiles
    out = {
        "learning_rate": schedule_as_text(cfg.learning_rate),
        "buffer_size": cfg.buffer_size,
        "learning_starts": cfg.learning_starts,
        "batch_size": cfg.batch_size,
        "tau": cfg.tau,
        "gamma": cfg.gamma,
        "train_freq": cfg.train_freq if cfg.train_freq_unit == "step" else [cfg.train_freq, cfg.train_freq_unit],
        "gradient_steps": cfg.gradient_steps,
        "target_update_interval": cfg.target_update_interval,
        "exploration_fraction": cfg.exploration_schedule.fraction,
        "exploration_initial_eps": cfg.exploration_schedule.initial,
        "exploration_final_eps": cfg.exploration_schedule.final,
        "max_grad_norm": cfg.max_grad_norm,
        "policy": policy_name(cfg.features),
        "precision": cfg.q_network.precision,
        "policy_kwargs": policy_kwargs,
    }
    return dict(sorted(out.items()))


DISCRETE = ("Discrete",)
DQN = Algorithm(
    "dqn", DQN_KEYS, reader(DQNConfig(), DQN_KEYS), dqn_hyperparams, make_learner,
    architecture_keys=ARCHITECTURE_KEYS, action_spaces=DISCRETE, reads_images=True,
)  # fmt: skip
QRDQN = Algorithm(
    "qrdqn", QRDQN_KEYS, reader(qrdqn_config(), QRDQN_KEYS), dqn_hyperparams, make_learner,
    architecture_keys=ARCHITECTURE_KEYS, action_spaces=DISCRETE, reads_images=True,
)  # fmt: skip
