"""Q networks and the critic ensemble, built once with `nn.vmap` (one parameter set per critic)."""

from __future__ import annotations

import flax.linen as nn
import jax
import jax.numpy as jnp

from rlbench.networks.mlp import MLP, NetworkConfig


class QNetwork(nn.Module):
    """Q(s, a): the MLP trunk on concat([obs, action]) and a linear output."""

    config: NetworkConfig

    @nn.compact
    def __call__(self, obs: jax.Array, action: jax.Array, train: bool = False, dropout: bool = False) -> jax.Array:
        x = jnp.concatenate([obs, action], axis=-1)
        x = MLP(self.config, name="trunk")(x, train=train, dropout=dropout)
        return nn.Dense(1, name="q")(x).squeeze(-1)  # [B]


class CriticEnsemble(nn.Module):
    """`n_critics` independent Q networks evaluated on the same inputs: output [n_critics, B].

    Parameters, BatchRenorm statistics and dropout masks are split across members, so each critic is
    initialised, normalised and regularised independently, while the ensemble is one batched computation.
    """

    config: NetworkConfig
    n_critics: int = 2

    @nn.compact
    def __call__(self, obs: jax.Array, action: jax.Array, train: bool = False, dropout: bool = False) -> jax.Array:
        ensemble = nn.vmap(
            QNetwork,
            variable_axes={"params": 0, "batch_stats": 0},
            split_rngs={"params": True, "dropout": True},
            in_axes=None,
            out_axes=0,
            axis_size=self.n_critics,
        )
        # Flags go positionally: lifted vmap drops keyword arguments (with only a warning).
        return ensemble(self.config, name="critics")(obs, action, train, dropout)
