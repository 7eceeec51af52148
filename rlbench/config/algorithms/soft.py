"""The SAC family's keys (SAC, DroQ, TQC, CrossQ) in RL Zoo's file format: the entropy temperature, its
target and gSDE, read into SoftConfig's fields and written back."""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from typing import Any

from rlbench.algos.soft.config import SoftConfig
from rlbench.algos.soft.temperature import TEMPERATURE_LOSSES
from rlbench.config.algorithms.shared import SHARED_KEYS, boolean, shared_hyperparams
from rlbench.config.values import number, parse_ent_coef
from rlbench.errors import ConfigError
from rlbench.networks.actor import GSDEConfig

GSDE_KEYS = ("sde_sample_freq", "use_sde_at_warmup")
GSDE_POLICY_KWARGS = ("log_std_init", "use_expln", "full_std", "clip_mean")
SOFT_KEYS = SHARED_KEYS.extend(
    keys=("ent_coef", "temperature_loss", "target_entropy", "use_sde", *GSDE_KEYS), policy_kwargs=GSDE_POLICY_KWARGS
)


def read_soft(params: Mapping[str, Any], kwargs: Mapping[str, Any], n_envs: int, where: str) -> dict[str, Any]:
    """The SAC family's fields an entry sets; `kwargs` are the policy_kwargs read_shared checked."""
    values: dict[str, Any] = {}
    if "ent_coef" in params:
        values["ent_coef"] = parse_ent_coef(params["ent_coef"])
    if "temperature_loss" in params:
        values["temperature_loss"] = _temperature_loss(params["temperature_loss"], where)
    if params.get("target_entropy", "auto") != "auto":
        values["target_entropy"] = number(params, "target_entropy", float)
    values["gsde"] = _gsde(params, kwargs, n_envs)
    return values


def soft_hyperparams(cfg: SoftConfig) -> dict[str, Any]:
    """The shared and the SAC family's fields of `cfg` in the file format."""
    out = shared_hyperparams(cfg)
    out["ent_coef"] = f"auto_{cfg.ent_coef.initial}" if cfg.ent_coef.learned else cfg.ent_coef.initial
    out["temperature_loss"] = cfg.temperature_loss
    out["target_entropy"] = "auto" if cfg.target_entropy is None else cfg.target_entropy
    out["use_sde"] = cfg.gsde is not None
    if cfg.gsde is not None:
        out["sde_sample_freq"], out["use_sde_at_warmup"] = cfg.gsde.sample_freq, cfg.gsde.at_warmup
        out["policy_kwargs"] |= {
            "log_std_init": cfg.gsde.log_std_init,
            "use_expln": cfg.gsde.use_expln,
            "full_std": cfg.gsde.full_std,
            "clip_mean": cfg.gsde.clip_mean,
        }
    return out


def _temperature_loss(value: object, where: str) -> str:
    if not isinstance(value, str) or value not in TEMPERATURE_LOSSES:
        valid = " or ".join(f"{name} ({meaning})" for name, meaning in TEMPERATURE_LOSSES.items())
        raise ConfigError(f"temperature_loss: expected {valid}, got {value!r} (from {where})")
    return value


def _gsde(params: Mapping[str, Any], kwargs: Mapping[str, Any], n_envs: int) -> GSDEConfig | None:
    """gSDE's settings when use_sde is True. Without it, its other keys change nothing: they are
    ignored with a warning (an RL Zoo entry with `-params use_sde:False` runs with plain SAC noise)."""
    use_sde = params.get("use_sde", False)
    if not isinstance(use_sde, bool):
        raise ConfigError(f"use_sde: expected True or False, got {use_sde!r}")
    given = [key for key in GSDE_KEYS if key in params] + [
        f"policy_kwargs.{k}" for k in GSDE_POLICY_KWARGS if k in kwargs
    ]
    if not use_sde:
        if given:
            warnings.warn(f"{', '.join(given)}: gSDE settings, ignored because use_sde is False", stacklevel=4)
        return None
    default = GSDEConfig()
    sample_freq = params.get("sde_sample_freq", default.sample_freq)
    if isinstance(sample_freq, bool) or not isinstance(sample_freq, int) or not (sample_freq == -1 or sample_freq >= 1):
        raise ConfigError(
            f"sde_sample_freq: expected -1 (resample at each rollout's start only) or a positive number of "
            f"steps, got {sample_freq!r}"
        )
    at_warmup = params.get("use_sde_at_warmup", default.at_warmup)
    if not isinstance(at_warmup, bool):
        raise ConfigError(f"use_sde_at_warmup: expected True or False, got {at_warmup!r}")
    return GSDEConfig(
        n_envs=n_envs,
        sample_freq=sample_freq,
        at_warmup=at_warmup,
        log_std_init=number({"log_std_init": kwargs.get("log_std_init", default.log_std_init)}, "log_std_init", float),
        use_expln=boolean(kwargs, "use_expln", default.use_expln),
        full_std=boolean(kwargs, "full_std", default.full_std),
        clip_mean=number({"clip_mean": kwargs.get("clip_mean", default.clip_mean)}, "clip_mean", float, 0),
    )
