"""TD3's keys (RL Zoo's td3.yml), DDPG's preset, and the Algorithm values of both."""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from typing import Any

from rlbench.algos.td3.config import NOISE_TYPES, ActionNoise, TD3Config, is_noise_type
from rlbench.algos.td3.update import make_learner
from rlbench.config.algorithm import Algorithm
from rlbench.config.algorithms.shared import SHARED_KEYS, read_shared, read_target, shared_hyperparams
from rlbench.config.values import number
from rlbench.errors import ConfigError

KEYS = SHARED_KEYS.extend(keys=("tau", "target_policy_noise", "target_noise_clip", "noise_type", "noise_std"))


def read_action_noise(params: Mapping[str, Any], n_envs: int, where: str) -> ActionNoise | None:
    """RL Zoo's noise_type (normal | ornstein-uhlenbeck) and noise_std; without noise_type, no noise."""
    kind = params.get("noise_type")
    if kind is None:
        if "noise_std" in params:
            warnings.warn("noise_std: ignored because noise_type is not set (no action noise)", stacklevel=3)
        return None
    noise_type = kind.strip() if isinstance(kind, str) else None
    if not is_noise_type(noise_type):
        valid = ", ".join(NOISE_TYPES)
        raise ConfigError(f"noise_type: expected one of {valid} (or None), got {kind!r} (from {where})")
    if "noise_std" not in params:
        raise ConfigError(f"noise_std: needed with noise_type {noise_type!r} (the noise's std) (from {where})")
    return ActionNoise(noise_type, number(params, "noise_std", float, 0), n_envs)


def build_config(params: Mapping[str, Any], n_envs: int, where: str) -> TD3Config:
    """A checked TD3Config (TD3, DDPG) from the learner keys of a merged hyperparameter entry."""
    values, _ = read_shared(params, n_envs, where, KEYS)
    values |= read_target(params)
    for key in ("target_policy_noise", "target_noise_clip"):
        if key in params:
            values[key] = number(params, key, float, 0)
    return TD3Config(**values, action_noise=read_action_noise(params, n_envs, where))


def config_to_hyperparams(cfg: TD3Config) -> dict[str, Any]:
    """The inverse of build_config, in the file format: what config.yml stores, sorted."""
    out = shared_hyperparams(cfg)  # policy_delay among them
    out |= {"tau": cfg.tau, "target_policy_noise": cfg.target_policy_noise, "target_noise_clip": cfg.target_noise_clip}
    out["noise_type"] = None if cfg.action_noise is None else cfg.action_noise.kind
    if cfg.action_noise is not None:
        out["noise_std"] = cfg.action_noise.std
    return dict(sorted(out.items()))


# DDPG (Lillicrap et al. 2016) as SB3 and SBX define it: TD3 with one critic, no target policy smoothing and
# no delay; the critic's learning rate as SBX's DDPG. Keys in the file format: files and -params override them.
DDPG_PRESET: dict[str, Any] = {
    "policy_delay": 1,
    "target_policy_noise": 0.0,
    "target_noise_clip": 0.0,
    "qf_learning_rate": 1e-3,
    "policy_kwargs": {"n_critics": 1},
}

TD3 = Algorithm("td3", KEYS, build_config, config_to_hyperparams, make_learner)
DDPG = Algorithm("ddpg", KEYS, build_config, config_to_hyperparams, make_learner, preset=DDPG_PRESET)
