"""From RL Zoo's hyperparameter spelling to typed, frozen configs, with every value checked.

This is the boundary: strings such as `lin_7.3e-4`, `auto_0.1` or `"dict(net_arch=[64, 64])"` are
parsed here (without eval) and nothing past this module sees them. Unknown keys and bad values raise
`ConfigError` naming the key and what would be valid, before any environment is built.
"""

from __future__ import annotations

import difflib
import math
import warnings
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any

from rlbench.algos.common.schedules import ConstantSchedule, LinearSchedule, Schedule
from rlbench.algos.sac.config import EntropyCoef, SACConfig
from rlbench.envs.wrappers import EnvWrapper, parse_env_wrappers
from rlbench.errors import ConfigError
from rlbench.literals import LiteralError, parse_value
from rlbench.networks.mlp import ACTIVATIONS, PRECISIONS, NetworkConfig


@dataclass(frozen=True, kw_only=True)
class RunConfig:
    """What the host loop needs besides the learner's config (RL Zoo's special keys and flags)."""

    env_id: str
    n_timesteps: int
    n_envs: int = 1
    env_kwargs: Mapping[str, Any] = field(default_factory=dict)
    seed: int = 0
    eval_env_kwargs: Mapping[str, Any] | None = None  # None: same as env_kwargs
    env_wrappers: tuple[EnvWrapper, ...] = ()  # checked wrappers, applied in order after gym.make
    gym_packages: tuple[str, ...] = ()  # imported in every env process before gym.make
    vec_env: str = "dummy"  # dummy (in-process) | subproc
    eval_freq: int = 25_000  # env steps; <= 0 disables evaluation
    eval_episodes: int = 5
    n_eval_envs: int = 1
    log_interval: int = 4  # episodes between metric logs; <= 0 disables
    verbose: int = 1
    progress: bool = False


# Keys of a hyperparameter entry consumed by the run, not by the learner.
RUN_KEYS = ("n_timesteps", "policy", "n_envs", "env_kwargs")
# RL Zoo keys rlbench does not implement yet: accepted only with a value that turns them off.
NOT_SUPPORTED_KEYS = (
    "normalize",
    "frame_stack",
    "vec_env_wrapper",
    "callback",
    "use_sde",
    "noise_type",
    "noise_std",
    "n_steps",
    "replay_buffer_class",
)
SAC_KEYS = (
    "learning_rate",
    "qf_learning_rate",
    "buffer_size",
    "learning_starts",
    "batch_size",
    "tau",
    "gamma",
    "train_freq",
    "gradient_steps",
    "policy_delay",
    "ent_coef",
    "target_entropy",
    "policy_kwargs",
    "precision",
)
POLICY_KWARGS_KEYS = ("net_arch", "activation_fn", "n_critics", "dropout_rate", "layer_norm", "optimizer_kwargs")
# RL Zoo policy_kwargs that only gSDE uses: refused by name until gSDE exists, never silently dropped.
GSDE_POLICY_KWARGS = ("log_std_init", "use_expln", "full_std", "clip_mean")
BATCH_NORM_KEYS = ("batch_norm", "batch_norm_actor", "batch_norm_momentum", "renorm_warmup_steps")


def split_entry(
    entry: Mapping[str, Any], where: str, trusted_wrapper_modules: Iterable[str]
) -> tuple[dict[str, Any], tuple[EnvWrapper, ...], dict[str, Any]]:
    """(run keys, env wrappers, learner keys) of a resolved hyperparameter entry; refuses RL Zoo keys
    rlbench does not implement (unless switched off) and policies other than MlpPolicy. Wrappers are
    resolved only from `trusted_wrapper_modules` (see rlbench.envs.wrappers)."""
    learner_keys = dict(entry)
    wrappers = parse_env_wrappers(learner_keys.pop("env_wrapper", None), trusted_wrapper_modules)
    for key in NOT_SUPPORTED_KEYS:
        if learner_keys.pop(key, None) not in (None, False, 0, [], {}):
            raise ConfigError(f"hyperparameter {key!r} is not supported yet by rlbench (from {where})")
    run_keys = {key: learner_keys.pop(key) for key in RUN_KEYS if key in learner_keys}
    if run_keys.get("policy", "MlpPolicy") != "MlpPolicy":
        raise ConfigError(f"policy: only 'MlpPolicy' is supported, got {run_keys['policy']!r}")
    return run_keys, wrappers, learner_keys


def normalize_entry(entry: Mapping[str, Any], source: str) -> dict[str, Any]:
    """Parse string-encoded values RL Zoo files use for dicts (policy_kwargs, env_kwargs)."""
    out = dict(entry)
    for key in ("policy_kwargs", "env_kwargs"):
        if isinstance(out.get(key), str):
            try:
                out[key] = parse_value(out[key])
            except LiteralError as error:
                raise ConfigError(f"{source}: {key}: {error}") from None
    if "env_kwargs" in out:
        out["env_kwargs"] = literal_mapping(out["env_kwargs"], f"env_kwargs (from {source})")
    return out


def _unknown(key: str, valid: tuple[str, ...], where: str) -> ConfigError:
    close = difflib.get_close_matches(key, valid, n=1)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    return ConfigError(f"unknown hyperparameter {key!r} in {where}{hint} (valid: {', '.join(sorted(valid))})")


INT_MAX = 2**63 - 1  # every integer setting must fit the int64 counters and shapes it ends up in


def _number(
    params: Mapping[str, Any],
    key: str,
    kind: type,
    low: float | None = None,
    high: float | None = None,
    *,
    low_open: bool = False,
    high_open: bool = False,
) -> Any:
    """params[key] as a finite `kind` (int or float) within the range; ConfigError naming the key otherwise."""
    value = params[key]
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ConfigError(f"{key}: expected a number, got {value!r}")
    if isinstance(value, float) and not math.isfinite(value):
        raise ConfigError(
            f"{key}: expected a finite number, got {value!r}"
            + (" (too large: a float setting must be finite)" if math.isinf(value) else "")
        )
    if kind is int:
        if isinstance(value, float) and not value.is_integer():
            raise ConfigError(f"{key}: expected an integer, got {value!r}")
        if abs(value) > INT_MAX:
            raise ConfigError(f"{key}: {value!r} is too large (an integer setting must fit 64 bits, |x| <= 2**63-1)")
        value = int(value)
    else:
        value = float(value)
    too_low = low is not None and (value <= low if low_open else value < low)
    too_high = high is not None and (value >= high if high_open else value > high)
    if too_low or too_high:
        lo = "(" if low_open else "["
        hi = ")" if high_open else "]"
        raise ConfigError(f"{key}: {value!r} is out of range {lo}{low}, {high if high is not None else 'inf'}{hi}")
    return value


def positive_int(value: Any, name: str) -> int:
    """A count (n_envs, n_timesteps, episodes): an integer in [1, 2**63-1]."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ConfigError(f"{name}: expected a positive integer, got {value!r}")
    if value > INT_MAX:
        raise ConfigError(f"{name}: {value!r} is too large (an integer setting must fit 64 bits, at most 2**63-1)")
    if (isinstance(value, float) and not value.is_integer()) or value < 1:
        raise ConfigError(f"{name}: expected a positive integer, got {value!r}")
    return int(value)


def literal_mapping(value: Any, name: str) -> dict[str, Any]:
    """A kwargs dict (env_kwargs, policy_kwargs): a mapping with string keys; None is empty."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ConfigError(f"{name}: expected a dict of keyword arguments, got {value!r}")
    for key in value:
        if not isinstance(key, str) or not key.isidentifier():
            raise ConfigError(f"{name}: {key!r} is not a valid keyword argument name (expected dict(name=value, ...))")
    return dict(value)


def parse_schedule(key: str, value: Any) -> Schedule:
    """A float (constant) or RL Zoo's `lin_<x>` (linear from x to 0 over training)."""
    if isinstance(value, str) and value.startswith("lin_"):
        try:
            start = float(value[4:])
        except ValueError:
            raise ConfigError(f"{key}: cannot read {value!r}; expected lin_<float>, e.g. lin_7.3e-4") from None
        schedule: Schedule = LinearSchedule(start)
    elif isinstance(value, int | float) and not isinstance(value, bool):
        schedule = ConstantSchedule(float(value))
    else:
        raise ConfigError(f"{key}: expected a positive number or lin_<float>, got {value!r}")
    if not math.isfinite(schedule.initial) or schedule.initial <= 0:
        raise ConfigError(f"{key}: expected a finite number > 0, got {value!r}")
    return schedule


def parse_ent_coef(value: Any) -> EntropyCoef:
    """`auto` (learned from 1.0), `auto_<x>` (learned from x) or a positive float (fixed)."""
    if value == "auto":
        return EntropyCoef(initial=1.0, learned=True)
    if isinstance(value, str) and value.startswith("auto_"):
        try:
            initial = float(value[5:])
        except ValueError:
            initial = -1.0
        if math.isfinite(initial) and initial > 0:
            return EntropyCoef(initial=initial, learned=True)
    elif isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value) and value > 0:
        return EntropyCoef(initial=float(value), learned=False)
    raise ConfigError(
        f"ent_coef: expected 'auto', 'auto_<positive finite float>' or a positive finite float, got {value!r}"
    )


def parse_activation(value: Any) -> str:
    name = str(value)
    # RL Zoo spells torch classes: nn.ReLU, th.nn.Tanh, torch.nn.SiLU.
    short = name.rsplit(".", 1)[-1].lower()
    aliases = {"leakyrelu": "leaky_relu"}
    short = aliases.get(short, short)
    if short not in ACTIVATIONS:
        raise ConfigError(f"activation_fn: unknown {value!r}; valid: {', '.join(ACTIVATIONS)} (or nn.ReLU style)")
    return short


def parse_net_arch(value: Any) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """A list (shared by actor and critic) or dict(pi=[...], qf=[...]) -> (actor, critic) widths."""

    def widths(v: Any, where: str) -> tuple[int, ...]:
        if not isinstance(v, list | tuple) or not all(
            isinstance(w, int) and not isinstance(w, bool) and w > 0 for w in v
        ):
            raise ConfigError(f"net_arch{where}: expected a list of positive integers, got {v!r}")
        return tuple(v)

    if isinstance(value, Mapping):
        extra = set(value) - {"pi", "qf"}
        if extra or not {"pi", "qf"} <= set(value):
            raise ConfigError(f"net_arch: a dict needs exactly the keys pi and qf, got {sorted(value)}")
        return widths(value["pi"], "['pi']"), widths(value["qf"], "['qf']")
    shared = widths(value, "")
    return shared, shared


def resolve_gradient_steps(params: Mapping[str, Any], n_envs: int) -> int:
    """gradient_steps = -1 means as many gradient steps as env steps collected per iteration."""
    gradient_steps = params.get("gradient_steps", 1)
    if gradient_steps == -1:
        return _train_freq(params) * n_envs
    return _number({"gradient_steps": gradient_steps}, "gradient_steps", int, 1)


def _train_freq(params: Mapping[str, Any]) -> int:
    value = params.get("train_freq", 1)
    if isinstance(value, list | tuple):
        if len(value) != 2 or value[1] != "step":
            raise ConfigError(f"train_freq: only steps are supported (n or [n, 'step']), got {value!r}")
        value = value[0]
    return _number({"train_freq": value}, "train_freq", int, 1)


def build_sac_config(params: Mapping[str, Any], n_envs: int, where: str) -> SACConfig:
    """A checked SACConfig (SAC, DroQ) from the learner keys of a merged hyperparameter entry."""
    return _build(params, n_envs, where, crossq=False)


def build_crossq_config(params: Mapping[str, Any], n_envs: int, where: str) -> SACConfig:
    """CrossQ shares SAC's config type; `tau` is refused (no target network) and BatchRenorm keys allowed."""
    return _build(params, n_envs, where, crossq=True)


def _build(params: Mapping[str, Any], n_envs: int, where: str, crossq: bool) -> SACConfig:
    valid = tuple(k for k in SAC_KEYS if not (crossq and k == "tau"))
    for key in params:
        if key == "tau" and crossq:
            raise ConfigError(f"tau: CrossQ has no target network, so tau does not apply (from {where})")
        if key not in valid:
            raise _unknown(key, valid + RUN_KEYS, where)
    defaults = SACConfig()
    values: dict[str, Any] = {}
    p = dict(params)
    if "learning_rate" in p:
        values["learning_rate"] = parse_schedule("learning_rate", p["learning_rate"])
    if p.get("qf_learning_rate") is not None:
        values["qf_learning_rate"] = _number(p, "qf_learning_rate", float, 0, low_open=True)
    for key, low in (("buffer_size", 1), ("learning_starts", 0), ("batch_size", 1), ("policy_delay", 1)):
        if key in p:
            values[key] = _number(p, key, int, low)
    if "tau" in p:
        values["tau"] = _number(p, "tau", float, 0, 1, low_open=True)
    if "gamma" in p:
        values["gamma"] = _number(p, "gamma", float, 0, 1, high_open=True)
    values["train_freq"] = _train_freq(p)
    values["gradient_steps"] = resolve_gradient_steps(p, n_envs)
    if "ent_coef" in p:
        values["ent_coef"] = parse_ent_coef(p["ent_coef"])
    if p.get("target_entropy", "auto") != "auto":
        values["target_entropy"] = _number(p, "target_entropy", float)
    values.update(_policy_kwargs(p.get("policy_kwargs") or {}, defaults, crossq))
    precision = p.get("precision", "float32")
    if precision not in PRECISIONS:
        raise ConfigError(f"precision: expected one of {', '.join(PRECISIONS)}, got {precision!r} (from {where})")
    values["actor"] = replace(values["actor"], precision=precision)
    values["critic"] = replace(values["critic"], precision=precision)
    return SACConfig(**values)


def _bool(kwargs: Mapping[str, Any], key: str, default: bool) -> bool:
    value = kwargs.get(key, default)
    if not isinstance(value, bool):
        raise ConfigError(f"policy_kwargs.{key}: expected True or False, got {value!r}")
    return value


def _policy_kwargs(kwargs: Any, defaults: SACConfig, crossq: bool) -> dict[str, Any]:
    kwargs = literal_mapping(kwargs, "policy_kwargs")
    valid = POLICY_KWARGS_KEYS + (BATCH_NORM_KEYS if crossq else ())
    for key in kwargs:
        if key in GSDE_POLICY_KWARGS:
            raise ConfigError(
                f"policy_kwargs.{key} is a gSDE setting, and gSDE (use_sde) is not supported yet by rlbench; remove it"
            )
        if key in BATCH_NORM_KEYS and not crossq:
            raise ConfigError(f"policy_kwargs.{key}: BatchRenorm is CrossQ's; use --algo crossq")
        if key not in valid:
            raise _unknown(key, valid, "policy_kwargs")
    actor_hidden, critic_hidden = parse_net_arch(kwargs.get("net_arch", list(defaults.actor.hidden)))
    activation = parse_activation(kwargs.get("activation_fn", defaults.actor.activation))
    dropout = _number({"dropout_rate": kwargs.get("dropout_rate", 0.0)}, "dropout_rate", float, 0, 1, high_open=True)
    layer_norm = _bool(kwargs, "layer_norm", False)
    norm = {
        "batch_norm_momentum": _number(
            {"batch_norm_momentum": kwargs.get("batch_norm_momentum", 0.99)},
            "batch_norm_momentum",
            float,
            0,
            1,
            high_open=True,
        ),
        "renorm_warmup_steps": _number(
            {"renorm_warmup_steps": kwargs.get("renorm_warmup_steps", 100_000)}, "renorm_warmup_steps", int, 0
        ),
    }
    critic_batch_norm = _bool(kwargs, "batch_norm", False)
    if critic_batch_norm and layer_norm:
        warnings.warn(
            "policy_kwargs: layer_norm together with batch_norm normalises twice; SBX advises "
            "layer_norm=False with CrossQ",
            stacklevel=2,
        )
    values: dict[str, Any] = {
        "actor": NetworkConfig(
            hidden=actor_hidden, activation=activation, batch_norm=_bool(kwargs, "batch_norm_actor", False), **norm
        ),
        # As SBX: dropout and layer norm regularise the critic only (DroQ).
        "critic": NetworkConfig(
            hidden=critic_hidden,
            activation=activation,
            dropout_rate=dropout,
            layer_norm=layer_norm,
            batch_norm=critic_batch_norm,
            **norm,
        ),
    }
    optimizer_kwargs = kwargs.get("optimizer_kwargs") or {}
    if not isinstance(optimizer_kwargs, Mapping) or set(optimizer_kwargs) - {"b1"}:
        raise ConfigError(
            f"policy_kwargs.optimizer_kwargs: only dict(b1=<float>) (Adam's beta 1) is supported, "
            f"got {optimizer_kwargs!r}"
        )
    if "b1" in optimizer_kwargs:
        values["adam_b1"] = _number(optimizer_kwargs, "b1", float, 0, 1, high_open=True)
    if "n_critics" in kwargs:
        values["n_critics"] = _number(kwargs, "n_critics", int, 1)
    return values


def sac_config_to_hyperparams(cfg: SACConfig, crossq: bool = False) -> dict[str, Any]:
    """The inverse of build_sac_config, in file spelling: what config.yml stores, sorted."""
    lr = cfg.learning_rate
    out: dict[str, Any] = {
        "learning_rate": f"lin_{lr.start}" if isinstance(lr, LinearSchedule) else lr.value,
        "qf_learning_rate": cfg.qf_learning_rate,
        "ent_coef": (f"auto_{cfg.ent_coef.initial}" if cfg.ent_coef.learned else cfg.ent_coef.initial),
        "target_entropy": "auto" if cfg.target_entropy is None else cfg.target_entropy,
        "precision": cfg.critic.precision,
        "policy_kwargs": {
            "net_arch": {"pi": list(cfg.actor.hidden), "qf": list(cfg.critic.hidden)},
            "activation_fn": cfg.actor.activation,
            "dropout_rate": cfg.critic.dropout_rate,
            "layer_norm": cfg.critic.layer_norm,
            "n_critics": cfg.n_critics,
            "optimizer_kwargs": {"b1": cfg.adam_b1},
        },
    }
    if cfg.critic.batch_norm or cfg.actor.batch_norm:
        out["policy_kwargs"] |= {
            "batch_norm": cfg.critic.batch_norm,
            "batch_norm_actor": cfg.actor.batch_norm,
            "batch_norm_momentum": cfg.critic.batch_norm_momentum,
            "renorm_warmup_steps": cfg.critic.renorm_warmup_steps,
        }
    skip = {
        "learning_rate",
        "qf_learning_rate",
        "ent_coef",
        "target_entropy",
        "actor",
        "critic",
        "n_critics",
        "adam_b1",
    }
    if crossq:
        skip.add("tau")
    for f in fields(cfg):
        if f.name not in skip:
            out[f.name] = getattr(cfg, f.name)
    return dict(sorted(out.items()))
