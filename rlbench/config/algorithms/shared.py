"""The keys every off-policy learner reads (SAC, DroQ, CrossQ, TQC, TD3, DDPG) in RL Zoo's file format: the
KeySet type, the shared keys read into ActorCriticConfig's fields, the target networks' and quantile
critics' keys, and the way back to the file format; and the features extractor `policy` names for the
value-based and on-policy learners (MlpPolicy, CnnPolicy).

Each algorithm's module here declares its key set, reads the shared keys with `read_shared` and its own
with rlbench.config.values, and writes the file format back with `shared_hyperparams`. config.yml and
checkpoints store that format, and resuming and enjoy.py build the config from it again, so for every
algorithm build_config(config_to_hyperparams(cfg)) == cfg (tests/unit/test_config.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any, Protocol

from rlbench.algos.common.config import ActorCriticConfig
from rlbench.algos.common.quantiles import Quantiles
from rlbench.algos.common.schedules import LinearSchedule
from rlbench.config.values import (
    literal_mapping,
    number,
    parse_activation,
    parse_net_arch,
    parse_policy,
    parse_schedule,
    parse_train_freq,
    resolve_gradient_steps,
    unknown_key,
)
from rlbench.errors import ConfigError
from rlbench.networks.mlp import PRECISIONS, Family, NetworkConfig, Precision
from rlbench.networks.nature_cnn import POLICY_EXTRACTORS, Features
from rlbench.networks.trunk import policy_name


@dataclass(frozen=True)
class KeySet:
    """The hyperparameter-file keys an algorithm reads, at the top level and in policy_kwargs.

    `refused` names keys that other algorithms read, with the reason they do not apply here, so a
    user who moves an entry between algorithms learns what to change rather than "unknown key".
    """

    keys: tuple[str, ...]
    policy_kwargs: tuple[str, ...]
    refused: Mapping[str, str] = field(default_factory=dict)

    def extend(
        self, keys: tuple[str, ...] = (), policy_kwargs: tuple[str, ...] = (), refused: Mapping[str, str] | None = None
    ) -> KeySet:
        return KeySet(self.keys + keys, self.policy_kwargs + policy_kwargs, {**self.refused, **(refused or {})})


SHARED_KEYS = KeySet(
    keys=(
        "learning_rate",
        "qf_learning_rate",
        "buffer_size",
        "learning_starts",
        "batch_size",
        "gamma",
        "train_freq",
        "gradient_steps",
        "policy_delay",
        "policy_kwargs",
        "policy",
        "precision",
    ),
    policy_kwargs=(
        "net_arch",
        "activation_fn",
        "n_critics",
        "dropout_rate",
        "layer_norm",
        "optimizer_kwargs",
    ),
)
# The policy_kwargs that shape the networks: a resumed run must keep them (the saved parameters fit no other).
ARCHITECTURE_KEYS = (
    "net_arch",
    "activation_fn",
    "dropout_rate",
    "layer_norm",
    "n_critics",
    "batch_norm",
    "batch_norm_actor",
)
# Keys of CrossQ and TQC, refused elsewhere with the algorithm to use.
BATCH_NORM_KEYS = ("batch_norm", "batch_norm_actor", "batch_norm_momentum", "renorm_warmup_steps")
BATCH_NORM_IS_CROSSQS = {
    f"policy_kwargs.{key}": "BatchRenorm is CrossQ's; use --algo crossq" for key in BATCH_NORM_KEYS
}
QUANTILES_ARE_TQCS = {
    key: "quantile critics are TQC's (or CrossQ's with n_quantiles); use --algo tqc"
    for key in ("top_quantiles_to_drop_per_net", "policy_kwargs.n_quantiles")
}


def checked_policy_kwargs(params: Mapping[str, Any], key_set: KeySet, where: str) -> dict[str, Any]:
    """policy_kwargs as a dict, after refusing any key (top level or inside it) `key_set` does not read."""
    for key in params:
        if key in key_set.refused:
            raise ConfigError(f"{key}: {key_set.refused[key]} (from {where})")
        if key not in key_set.keys:
            raise unknown_key(key, key_set.keys, where)
    kwargs = literal_mapping(params.get("policy_kwargs"), "policy_kwargs")
    for key in kwargs:
        if f"policy_kwargs.{key}" in key_set.refused:
            raise ConfigError(f"policy_kwargs.{key}: {key_set.refused[f'policy_kwargs.{key}']}")
        if key not in key_set.policy_kwargs:
            raise unknown_key(key, key_set.policy_kwargs, "policy_kwargs")
    return kwargs


def boolean(kwargs: Mapping[str, Any], key: str, default: bool) -> bool:
    value = kwargs.get(key, default)
    if not isinstance(value, bool):
        raise ConfigError(f"policy_kwargs.{key}: expected True or False, got {value!r}")
    return value


def read_shared(
    params: Mapping[str, Any], n_envs: int, where: str, key_set: KeySet
) -> tuple[dict[str, Any], dict[str, Any]]:
    """(the shared fields' values, the checked policy_kwargs) of the learner keys of a merged entry.

    Every key is checked against `key_set` first; the algorithm reads its own keys from `params` and
    the returned policy_kwargs."""
    kwargs = checked_policy_kwargs(params, key_set, where)
    p = dict(params)
    values = _shared_numbers(p)
    values["train_freq"], values["train_freq_unit"] = parse_train_freq(p)
    if values["train_freq_unit"] == "episode" and n_envs > 1:
        raise ConfigError(
            f"train_freq: {p['train_freq']!r} counts episodes, which needs n_envs 1 (as SB3: the envs' episodes "
            f"end at different steps), got n_envs {n_envs} (from {where})"
        )
    values["gradient_steps"] = resolve_gradient_steps(p, n_envs)
    precision = p.get("precision", "float32")
    if precision not in PRECISIONS:
        raise ConfigError(f"precision: expected one of {', '.join(PRECISIONS)}, got {precision!r} (from {where})")
    values["actor"], values["critic"] = _networks(kwargs, precision, p.get("policy", "MlpPolicy"))
    values |= _optimizer_and_critics(kwargs, values["critic"].family)
    return values, kwargs


def _shared_numbers(params: Mapping[str, Any]) -> dict[str, Any]:
    """The learning rates, sizes and discount an entry sets (the others keep their defaults)."""
    values: dict[str, Any] = {}
    if "learning_rate" in params:
        values["learning_rate"] = parse_schedule("learning_rate", params["learning_rate"])
    if params.get("qf_learning_rate") is not None:
        values["qf_learning_rate"] = number(params, "qf_learning_rate", float, 0, low_open=True)
    for key, low in (("buffer_size", 1), ("learning_starts", 0), ("batch_size", 1), ("policy_delay", 1)):
        if key in params:
            values[key] = number(params, key, int, low)
    if "gamma" in params:
        values["gamma"] = number(params, "gamma", float, 0, 1, high_open=True)
    return values


def _optimizer_and_critics(kwargs: Mapping[str, Any], family: Family) -> dict[str, Any]:
    """Adam's beta 1 (policy_kwargs.optimizer_kwargs), AdamW's weight decay with SimbaPolicy (SBX's optimizer
    for it) and the number of critics, when policy_kwargs sets them."""
    values: dict[str, Any] = {}
    optimizer_kwargs = kwargs.get("optimizer_kwargs") or {}
    accepted = {"b1", "weight_decay"} if family == "simba" else {"b1"}
    if not isinstance(optimizer_kwargs, Mapping) or set(optimizer_kwargs) - accepted:
        raise ConfigError(
            f"policy_kwargs.optimizer_kwargs: only dict(b1=<float>) (Adam's beta 1) is supported, and "
            f"weight_decay=<float> with policy SimbaPolicy (AdamW), got {optimizer_kwargs!r}"
        )
    if "b1" in optimizer_kwargs:
        values["adam_b1"] = number(optimizer_kwargs, "b1", float, 0, 1, high_open=True)
    if family == "simba":
        values["weight_decay"] = number(
            {"weight_decay": optimizer_kwargs.get("weight_decay", 1e-4)}, "weight_decay", float, 0
        )
    if "n_critics" in kwargs:
        values["n_critics"] = number(kwargs, "n_critics", int, 1)
    return values


def _networks(kwargs: Mapping[str, Any], precision: Precision, policy: object) -> tuple[NetworkConfig, NetworkConfig]:
    """(actor, critic) architectures from policy_kwargs and the `policy` naming their family."""
    default = NetworkConfig()
    actor_hidden, critic_hidden = parse_net_arch(kwargs.get("net_arch", list(default.hidden)))
    family = parse_policy(policy, actor_hidden, critic_hidden)
    activation = parse_activation(kwargs.get("activation_fn", default.activation))
    dropout = number({"dropout_rate": kwargs.get("dropout_rate", 0.0)}, "dropout_rate", float, 0, 1, high_open=True)
    actor = NetworkConfig(family=family, hidden=actor_hidden, activation=activation, precision=precision)
    # As SBX: dropout and layer norm regularise the critic only (DroQ).
    critic = replace(actor, hidden=critic_hidden, dropout_rate=dropout, layer_norm=boolean(kwargs, "layer_norm", False))
    return actor, critic


def shared_hyperparams(cfg: ActorCriticConfig) -> dict[str, Any]:
    """The shared fields of `cfg` in the file format (what config.yml stores)."""
    lr = cfg.learning_rate
    out: dict[str, Any] = {
        "learning_rate": f"lin_{lr.start}" if isinstance(lr, LinearSchedule) else lr.value,
        "qf_learning_rate": cfg.qf_learning_rate,
        "train_freq": cfg.train_freq if cfg.train_freq_unit == "step" else [cfg.train_freq, cfg.train_freq_unit],
        "precision": cfg.critic.precision,
        "policy": policy_name(cfg.critic),
        "policy_kwargs": {
            "net_arch": {"pi": list(cfg.actor.hidden), "qf": list(cfg.critic.hidden)},
            "activation_fn": cfg.actor.activation,
            "dropout_rate": cfg.critic.dropout_rate,
            "layer_norm": cfg.critic.layer_norm,
            "n_critics": cfg.n_critics,
            "optimizer_kwargs": {"b1": cfg.adam_b1},
        },
    }
    if cfg.weight_decay is not None:
        out["policy_kwargs"]["optimizer_kwargs"]["weight_decay"] = cfg.weight_decay
    spelled = set(out) | {"actor", "critic", "n_critics", "adam_b1", "weight_decay", "train_freq_unit"}
    for f in fields(ActorCriticConfig):
        if f.name not in spelled:
            out[f.name] = getattr(cfg, f.name)
    return out


def read_target(params: Mapping[str, Any]) -> dict[str, Any]:
    """The target networks' settings an entry sets: the Polyak rate `tau`, and (SAC, TQC)
    `target_update_interval`, the gradient steps from one Polyak update to the next."""
    values: dict[str, Any] = {}
    if "tau" in params:
        values["tau"] = number(params, "tau", float, 0, 1, low_open=True)
    if "target_update_interval" in params:
        values["target_update_interval"] = number(params, "target_update_interval", int, 1)
    return values


class TargetCritics(Protocol):
    """A config with target critics updated by Polyak averaging (SACConfig, TQCConfig)."""

    @property
    def tau(self) -> float: ...

    @property
    def target_update_interval(self) -> int: ...


def target_hyperparams(cfg: TargetCritics) -> dict[str, Any]:
    """The inverse of read_target, in the file format, for a config with target critics (SACConfig, TQCConfig)."""
    return {"tau": cfg.tau, "target_update_interval": cfg.target_update_interval}


def read_quantiles(params: Mapping[str, Any], policy_kwargs: Mapping[str, Any]) -> Quantiles:
    """n_quantiles (a policy_kwargs key, as in RL Zoo's files) and top_quantiles_to_drop_per_net (top level)."""
    default = Quantiles()
    n_quantiles = default.n_quantiles
    if "n_quantiles" in policy_kwargs:
        n_quantiles = number(policy_kwargs, "n_quantiles", int, 1)
    drop = default.top_quantiles_to_drop_per_net
    if "top_quantiles_to_drop_per_net" in params:
        drop = number(params, "top_quantiles_to_drop_per_net", int, 0)
    if drop >= n_quantiles:
        raise ConfigError(
            f"top_quantiles_to_drop_per_net: {drop} would drop every quantile (n_quantiles is {n_quantiles}); "
            f"expected 0 <= top_quantiles_to_drop_per_net < n_quantiles"
        )
    return Quantiles(n_quantiles, drop)


def quantile_hyperparams(hyperparams: dict[str, Any], quantiles: Quantiles) -> dict[str, Any]:
    """`hyperparams` (file format) with the quantile settings added where RL Zoo's files put them."""
    policy_kwargs = {**hyperparams["policy_kwargs"], "n_quantiles": quantiles.n_quantiles}
    return {
        **hyperparams,
        "policy_kwargs": policy_kwargs,
        "top_quantiles_to_drop_per_net": quantiles.top_quantiles_to_drop_per_net,
    }


def read_features(params: Mapping[str, Any], kwargs: Mapping[str, Any], where: str) -> Features:
    """`policy` and the policy_kwargs of its features extractor: features_extractor_kwargs=dict(features_dim=N)
    (CnnPolicy) and normalize_images (True only: images are always scaled to [0, 1])."""
    policy = params.get("policy", "MlpPolicy")
    if policy not in POLICY_EXTRACTORS:
        raise ConfigError(f"policy: {policy!r} is not supported; valid: {', '.join(POLICY_EXTRACTORS)} (from {where})")
    if kwargs.get("normalize_images", True) is not True:
        raise ConfigError(f"policy_kwargs.normalize_images: only True is read (pixels scaled by 255) (from {where})")
    name = "policy_kwargs.features_extractor_kwargs"
    extractor_kwargs = literal_mapping(kwargs.get("features_extractor_kwargs"), name)
    if set(extractor_kwargs) - {"features_dim"} or (extractor_kwargs and policy != "CnnPolicy"):
        raise ConfigError(f"{name}: only features_dim, for CnnPolicy, got {dict(extractor_kwargs)} (from {where})")
    dim = number(extractor_kwargs, "features_dim", int, 1) if "features_dim" in extractor_kwargs else Features().dim
    return Features(extractor=POLICY_EXTRACTORS[policy], dim=dim)


def extractor_kwargs(features: Features) -> dict[str, Any]:
    """CnnPolicy's features_extractor_kwargs in the file format; none for MlpPolicy."""
    return {} if features.extractor == "flatten" else {"features_extractor_kwargs": {"features_dim": features.dim}}
