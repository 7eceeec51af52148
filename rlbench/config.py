"""A hyperparameter entry's run half: RunConfig, and the split of an entry into run keys, env
wrappers and learner keys.

This and each algorithm's config.py (rlbench/algos/<algo>/config.py, with the shared spellings in
rlbench/algos/common/spelling.py) are the boundary: strings such as `lin_7.3e-4`, `auto_0.1` or
`"dict(net_arch=[64, 64])"` are parsed there (without eval) and nothing past them sees them. Unknown
keys and bad values raise `ConfigError` naming the key and what would be valid, before any
environment is built.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from rlbench.algos.common.spelling import literal_mapping, number
from rlbench.buffers.normalization import NormalizeConfig
from rlbench.envs.wrappers import EnvWrapper, parse_env_wrappers
from rlbench.errors import ConfigError
from rlbench.literals import LiteralError, parse_value


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
    normalize: NormalizeConfig | None = None  # RL Zoo's VecNormalize; None: observations and rewards as they come


# Keys of a hyperparameter entry consumed by the run, not by the learner.
RUN_KEYS = ("n_timesteps", "policy", "n_envs", "env_kwargs", "normalize")
# RL Zoo keys rlbench does not implement yet: accepted only with a value that turns them off.
NOT_SUPPORTED_KEYS = (
    "frame_stack",
    "vec_env_wrapper",
    "callback",
    "noise_type",
    "noise_std",
    "n_steps",
    "replay_buffer_class",
)


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
    """Parse string-encoded values RL Zoo files use for dicts (policy_kwargs, env_kwargs, normalize)."""
    out = dict(entry)
    for key in ("policy_kwargs", "env_kwargs", "normalize"):
        if isinstance(out.get(key), str):
            try:
                out[key] = parse_value(out[key])
            except LiteralError as error:
                raise ConfigError(f"{source}: {key}: {error}") from None
    if "env_kwargs" in out:
        out["env_kwargs"] = literal_mapping(out["env_kwargs"], f"env_kwargs (from {source})")
    return out


NORMALIZE_KWARGS = tuple(f.name for f in fields(NormalizeConfig))


def parse_normalize(value: Any, algo_gamma: float | None, where: str) -> NormalizeConfig | None:
    """RL Zoo's `normalize`: true (VecNormalize's defaults), false / None (off), or
    dict(norm_obs=..., norm_reward=..., clip_obs=..., clip_reward=..., gamma=..., epsilon=...).

    As RL Zoo, the algorithm's gamma, when the entry sets one (`algo_gamma`), is the return's discount,
    over the dict's. Pass None for an entry already resolved (a checkpoint's), whose gamma is final."""
    if value is None or value is False:
        return None
    if value is True:
        kwargs: dict[str, Any] = {}
    elif isinstance(value, Mapping):
        kwargs = literal_mapping(value, f"normalize (from {where})")
    else:
        raise ConfigError(
            f"normalize: expected true, false or dict(norm_obs=..., norm_reward=..., ...), got {value!r} (from {where})"
        )
    for key in kwargs:
        if key not in NORMALIZE_KWARGS:
            close = difflib.get_close_matches(key, NORMALIZE_KWARGS, n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise ConfigError(
                f"normalize: unknown argument {key!r} (from {where}){hint} (valid: {', '.join(NORMALIZE_KWARGS)})"
            )
    values: dict[str, Any] = {}
    for key in ("norm_obs", "norm_reward"):
        if key in kwargs:
            if not isinstance(kwargs[key], bool):
                raise ConfigError(f"normalize.{key}: expected True or False, got {kwargs[key]!r} (from {where})")
            values[key] = kwargs[key]
    for key in ("clip_obs", "clip_reward", "epsilon"):
        if key in kwargs:
            values[key] = number({f"normalize.{key}": kwargs[key]}, f"normalize.{key}", float, 0, low_open=True)
    if "gamma" in kwargs:
        values["gamma"] = number({"normalize.gamma": kwargs["gamma"]}, "normalize.gamma", float, 0, 1, high_open=True)
    if algo_gamma is not None:
        values["gamma"] = algo_gamma
    return NormalizeConfig(**values)


def normalize_to_entry(cfg: NormalizeConfig) -> dict[str, Any]:
    """The inverse of parse_normalize, in file spelling: what config.yml and the manifests store."""
    return {name: getattr(cfg, name) for name in NORMALIZE_KWARGS}
