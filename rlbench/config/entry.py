"""A hyperparameter entry's run half: RunConfig, and the split of an entry into run keys, env
wrappers and learner keys.

This and each algorithm's keys (rlbench/config/algorithms/<algo>.py, with the shared value formats in
rlbench/config/values.py) are the boundary: strings such as `lin_7.3e-4`, `auto_0.1` or
`"dict(net_arch=[64, 64])"` are parsed there (without eval) and nothing past them sees them. Unknown
keys and bad values raise `ConfigError` naming the key and what would be valid, before any
environment is built.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from rlbench.buffers.normalization import NormalizeConfig
from rlbench.config.literals import LiteralError, parse_value
from rlbench.config.values import literal_mapping, number, positive_int
from rlbench.envs.observations import FrameStack
from rlbench.envs.wrappers import EnvWrapper, parse_env_wrappers
from rlbench.errors import ConfigError
from rlbench.files import UntrustedFileError, check_tree
from rlbench.types import VecEnvKind


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
    vec_env: VecEnvKind = "dummy"  # dummy (in-process) | subproc
    eval_freq: int = 25_000  # env steps; <= 0 disables evaluation
    eval_episodes: int = 5
    n_eval_envs: int = 1
    log_interval: int = 4  # episodes between metric logs; <= 0 disables
    verbose: int = 1
    progress: bool = False
    normalize: NormalizeConfig | None = None  # RL Zoo's VecNormalize; None: observations and rewards as they come
    stats_window_size: int = 100  # episodes averaged in rollout/ep_rew_mean and ep_len_mean, as SB3's


# Keys of a hyperparameter entry consumed by the run, not by the learner.
RUN_KEYS = (
    "n_timesteps",
    "n_envs",
    "env_kwargs",
    "normalize",
    "stats_window_size",
    "replay_buffer_kwargs",
    "optimize_memory_usage",
)
# RL Zoo keys rlbench does not implement yet: accepted only with a value that turns them off. (A key that some
# algorithms read is the Algorithm's to refuse: rlbench.config.algorithm.Algorithm.build_config.)
NOT_SUPPORTED_KEYS = (
    "vec_env_wrapper",
    "callback",
    "replay_buffer_class",
)


def split_entry(
    entry: Mapping[str, Any], where: str, trusted_wrapper_modules: Iterable[str]
) -> tuple[dict[str, Any], tuple[EnvWrapper, ...], dict[str, Any]]:
    """(run keys, env wrappers, learner keys) of a resolved hyperparameter entry; refuses RL Zoo keys
    rlbench does not implement (unless switched off). `policy` is the learner's (its network family). Wrappers are
    resolved only from `trusted_wrapper_modules` (see rlbench.envs.wrappers)."""
    learner_keys = dict(entry)
    wrappers = entry_env_wrappers(learner_keys, trusted_wrapper_modules, where)
    learner_keys.pop("env_wrapper", None)
    learner_keys.pop("frame_stack", None)
    for key in NOT_SUPPORTED_KEYS:
        if learner_keys.pop(key, None) not in (None, False, 0, [], {}):
            raise ConfigError(f"hyperparameter {key!r} is not supported yet by rlbench (from {where})")
    run_keys = {key: learner_keys.pop(key) for key in RUN_KEYS if key in learner_keys}
    return run_keys, wrappers, learner_keys


# The EnvWrapper of RL Zoo's `frame_stack` key: not a dotted path, so no env_wrapper entry can spell it.
FRAME_STACK = "frame_stack"
# RL Zoo stacks 2 or 4; the bound keeps a file read back (config.yml, a manifest) from sizing the stack at will.
MAX_FRAME_STACK = 1000


def entry_env_wrappers(entry: Mapping[str, Any], trusted: Iterable[str], where: str) -> tuple[EnvWrapper, ...]:
    """Every wrapper an entry puts on each env, in order: its env_wrapper list, then the stacking of
    `frame_stack: N` (RL Zoo stacks over the vector env, so after them)."""
    wrappers = parse_env_wrappers(entry.get("env_wrapper"), trusted)
    n_stack = entry.get("frame_stack")
    if n_stack is None or n_stack is False:
        return wrappers
    if isinstance(n_stack, bool) or not isinstance(n_stack, int) or not 1 <= n_stack <= MAX_FRAME_STACK:
        raise ConfigError(
            f"frame_stack: expected a positive integer up to {MAX_FRAME_STACK} (observations stacked) or None, "
            f"got {n_stack!r} (from {where})"
        )
    return (*wrappers, EnvWrapper(FRAME_STACK, FrameStack, {"n_stack": n_stack}))


def wrappers_to_entry(wrappers: Iterable[EnvWrapper]) -> dict[str, Any]:
    """The inverse of entry_env_wrappers, in the file format (config.yml): env_wrapper and frame_stack."""
    out: dict[str, Any] = {}
    listed = [wrapper.to_entry() for wrapper in wrappers if wrapper.name != FRAME_STACK]
    if listed:
        out["env_wrapper"] = listed
    for wrapper in wrappers:
        if wrapper.name == FRAME_STACK:
            out["frame_stack"] = wrapper.kwargs["n_stack"]
    return out


# SB3's ReplayBuffer keyword arguments that rlbench's uniform buffer can take: timeouts are always handled (a
# truncated transition bootstraps from its final observation), and memory is never traded for that.
REPLAY_BUFFER_KWARGS = ("handle_timeout_termination", "optimize_memory_usage")


def buffer_notes(run_keys: Mapping[str, Any], where: str) -> list[str]:
    """Check replay_buffer_kwargs and optimize_memory_usage as SB3 reads them; ConfigError for what rlbench's
    buffer cannot do, else the notes for settings accepted that change nothing here (printed once)."""
    kwargs = literal_mapping(run_keys.get("replay_buffer_kwargs"), f"replay_buffer_kwargs (from {where})")
    for key in kwargs:
        if key not in REPLAY_BUFFER_KWARGS:
            raise ConfigError(
                f"replay_buffer_kwargs: {key!r} is not supported by rlbench's uniform replay buffer "
                f"(supported: {', '.join(REPLAY_BUFFER_KWARGS)}) (from {where})"
            )
    if kwargs.get("handle_timeout_termination", True) is not True:
        raise ConfigError(
            f"replay_buffer_kwargs: handle_timeout_termination must be True (rlbench always bootstraps from the "
            f"final observation of a truncated episode), got {kwargs['handle_timeout_termination']!r} (from {where})"
        )
    notes = []
    for name, value in (
        ("optimize_memory_usage", run_keys.get("optimize_memory_usage", False)),
        ("replay_buffer_kwargs.optimize_memory_usage", kwargs.get("optimize_memory_usage", False)),
    ):
        if not isinstance(value, bool):
            raise ConfigError(f"{name}: expected True or False, got {value!r} (from {where})")
        if value:
            notes.append(
                f"Note: {name} changes nothing in rlbench: its replay buffer keeps each transition's next "
                "observation in the transition's own row"
            )
    return notes


def parse_stats_window_size(run_keys: Mapping[str, Any]) -> int:
    return positive_int(run_keys.get("stats_window_size", RunConfig.stats_window_size), "stats_window_size")


def normalize_entry(entry: Mapping[str, Any], source: str) -> dict[str, Any]:
    """Parse string-encoded values RL Zoo files use for dicts (policy_kwargs, env_kwargs, normalize,
    replay_buffer_kwargs). Every entry passes here, whatever its source (a file, a checkpoint's manifest, an
    Optuna trial, -params): its size is bounded before anything walks or prints its values."""
    out = dict(entry)
    for key in ("policy_kwargs", "env_kwargs", "normalize", "replay_buffer_kwargs"):
        if isinstance(out.get(key), str):
            try:
                out[key] = parse_value(out[key])
            except LiteralError as error:
                raise ConfigError(f"{source}: {key}: {error}") from None
    try:  # the loop above reads only the top-level keys
        check_tree(out)
    except UntrustedFileError as error:
        raise ConfigError(f"{source}: {error}") from None
    if "env_kwargs" in out:
        out["env_kwargs"] = literal_mapping(out["env_kwargs"], f"env_kwargs (from {source})")
    return out


NORMALIZE_KWARGS = tuple(f.name for f in fields(NormalizeConfig))


def parse_normalize(value: object, algo_gamma: float | None, where: str) -> NormalizeConfig | None:
    """RL Zoo's `normalize`: true (VecNormalize's defaults), false / None (off), or
    dict(norm_obs=..., norm_reward=..., clip_obs=..., clip_reward=..., gamma=..., epsilon=...).

    As RL Zoo, the algorithm's gamma, when the entry sets one (`algo_gamma`), is the return's discount,
    over the dict's. Pass None for an entry already resolved (a checkpoint's), whose gamma is final."""
    kwargs = _normalize_kwargs(value, where)
    if kwargs is None:
        return None
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


def _normalize_kwargs(value: object, where: str) -> dict[str, Any] | None:
    """`normalize`'s arguments by name ({} for true, None when off), each one VecNormalize takes."""
    if value is None or value is False:
        return None
    if value is True:
        return {}
    if not isinstance(value, Mapping):
        raise ConfigError(
            f"normalize: expected true, false or dict(norm_obs=..., norm_reward=..., ...), got {value!r} (from {where})"
        )
    kwargs = literal_mapping(value, f"normalize (from {where})")
    for key in kwargs:
        if key not in NORMALIZE_KWARGS:
            close = difflib.get_close_matches(key, NORMALIZE_KWARGS, n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise ConfigError(
                f"normalize: unknown argument {key!r} (from {where}){hint} (valid: {', '.join(NORMALIZE_KWARGS)})"
            )
    return kwargs


def normalize_to_entry(cfg: NormalizeConfig) -> dict[str, Any]:
    """The inverse of parse_normalize, in the file format: what config.yml and the manifests store."""
    return {name: getattr(cfg, name) for name in NORMALIZE_KWARGS}
