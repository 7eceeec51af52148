"""The trunk a network's config names (its `family`), the policy names that choose it, and its width per
batch row. Actors and critics build their trunk here, so every algorithm gets every family."""

from __future__ import annotations

from rlbench.networks.mlp import MLP, NetworkConfig
from rlbench.networks.simba import SIMBA_EXPANSION, SimbaTrunk

# RL Zoo's / SBX's `policy` names and the family each builds.
POLICIES: dict[str, str] = {"MlpPolicy": "mlp", "SimbaPolicy": "simba"}


def policy_name(config: NetworkConfig) -> str:
    """The `policy` value that builds `config`'s family (the inverse of POLICIES)."""
    return next(name for name, family in POLICIES.items() if family == config.family)


def make_trunk(config: NetworkConfig, name: str = "trunk") -> MLP | SimbaTrunk:
    """The trunk module of `config`'s family (call it inside a parent's compact method)."""
    if config.family == "simba":
        return SimbaTrunk(config, name=name)
    return MLP(config, name=name)


def trunk_units(config: NetworkConfig) -> int:
    """Values a forward pass keeps per batch row, counted as layer outputs (the memory estimate):
    an MLP's hidden widths; SimBa's input layer, each block's normalisation, expanded hidden layer and
    output, and the final normalisation."""
    if config.family == "simba":
        return sum((2 + SIMBA_EXPANSION) * width for width in config.hidden) + 2 * config.hidden[0]
    return sum(config.hidden)
