import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax
import pytest

from rlbench.algos.sac.config import SACConfig
from rlbench.networks.mlp import NetworkConfig

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def tiny_sac_config(**overrides) -> SACConfig:
    """Tiny networks and batches: fast to compile, enough to exercise every code path."""
    values = dict(
        batch_size=4,
        buffer_size=64,
        actor=NetworkConfig(hidden=(8, 8)),
        critic=NetworkConfig(hidden=(8, 8)),
    )
    values.update(overrides)
    return SACConfig(**values)


@pytest.fixture
def key():
    return jax.random.key(0)
