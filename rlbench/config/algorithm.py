"""An algorithm as the rest of rlbench knows it: one `Algorithm` value, listed in rlbench/config/registry.py.

It joins the algorithm's math (rlbench/algos/<algo>/: `make_learner`: init, fused gradient steps, metrics,
acting and exploration state, parameters, memory estimate) to its keys in RL Zoo's file format
(rlbench/config/algorithms/<algo>.py: key set, validation, `build_config`, `config_to_hyperparams`, the
policy_kwargs that shape its networks, which a resume must keep, and its preset). Outside those two places
nothing knows an algorithm but through it. Its Optuna search space is joined by name (rlbench.tuning.spaces).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from rlbench.algos.common.config import LearnerConfig
from rlbench.algos.common.learner import Learner
from rlbench.config.algorithms.shared import ARCHITECTURE_KEYS, KeySet
from rlbench.errors import ConfigError
from rlbench.types import EnvSpec


@dataclass(frozen=True)
class Algorithm:
    name: str  # the --algo value
    keys: KeySet  # the keys its entries may set (read_config checks them)
    read_config: Callable[[Mapping[str, Any], int, str], LearnerConfig]  # (learner keys, n_envs, where)
    # These two take the config read_config returns, of the algorithm's own class (SACConfig, PPOConfig, ...):
    # a Callable over the LearnerConfig union cannot name it, so their argument is Any.
    config_to_hyperparams: Callable[[Any], dict[str, Any]]  # its inverse, in the file format
    make_learner: Callable[[Any, EnvSpec], Learner[Any]]
    preset: Mapping[str, Any] = field(default_factory=dict)  # hyperparameters (file format) below the file entry
    architecture_keys: tuple[str, ...] = ARCHITECTURE_KEYS  # policy_kwargs a resume cannot change
    action_spaces: tuple[str, ...] = ("Box",)  # the gymnasium action spaces it acts in
    reads_images: bool = False  # image observations (rlbench.envs.images): MlpPolicy and CnnPolicy read them
    # SB3's learn(log_interval) default: episodes between logs off-policy (4), rollouts on-policy (PPO 1, A2C 100)
    log_interval: int = 4
    # Run JAX's CPU computations on the calling thread (rlbench.run.device): measured faster where the host loop
    # calls a small acting program at every env step between updates (PPO, A2C), not shown for the others.
    inline_cpu_calls: bool = False
    # The keys other algorithms read and this one does not, with those algorithms (set by the registry), so that
    # an entry moved from one algorithm to another is refused naming the algorithm its key belongs to.
    foreign_keys: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    def build_config(self, params: Mapping[str, Any], n_envs: int, where: str) -> LearnerConfig:
        """The checked config of the learner keys of a merged entry (ConfigError, exit 2, naming the key).
        Another algorithm's key set to None (switched off, e.g. RL Zoo's `noise_type: None`) is left out."""
        params = {key: value for key, value in params.items() if not (key in self.foreign_keys and value is None)}
        for key in _spelled_keys(params):
            if key in self.foreign_keys and key not in self.keys.refused:
                owners = ", ".join(self.foreign_keys[key])
                raise ConfigError(f"{key}: a key of {owners}; --algo {self.name} does not read it (from {where})")
        return self.read_config(params, n_envs, where)


def _spelled_keys(params: Mapping[str, Any]) -> list[str]:
    """The top-level keys of an entry, and those of its policy_kwargs as policy_kwargs.<key>."""
    kwargs = params.get("policy_kwargs")
    nested = [f"policy_kwargs.{key}" for key in kwargs] if isinstance(kwargs, Mapping) else []
    return [*params, *nested]


def with_foreign_keys(algorithms: Iterable[Algorithm]) -> dict[str, Algorithm]:
    """Each algorithm by name, knowing which of the others' keys it does not read and whose they are."""
    listed = list(algorithms)
    readers: dict[str, list[str]] = {}
    for algo in listed:
        for key in (*algo.keys.keys, *(f"policy_kwargs.{key}" for key in algo.keys.policy_kwargs)):
            readers.setdefault(key, []).append(algo.name)
    out = {}
    for algo in listed:
        own = {*algo.keys.keys, *(f"policy_kwargs.{key}" for key in algo.keys.policy_kwargs)}
        foreign = {key: tuple(names) for key, names in readers.items() if key not in own}
        out[algo.name] = replace(algo, foreign_keys=foreign)
    return out
