"""Q networks (a trunk of the config's family, networks/trunk.py) and the critic ensemble, built once with
`nn.vmap` (one parameter set per critic)."""

from __future__ import annotations

import flax.linen as nn
import jax
import jax.numpy as jnp

from rlbench.networks.mlp import NetworkConfig
from rlbench.networks.plain_layout import KERNELS_T
from rlbench.networks.trunk import make_trunk


class QNetwork(nn.Module):
    """Q(s, a): the trunk on concat([obs, action]) and a linear output; [B], or [B, n_quantiles]
    quantiles of the return for a distributional critic (TQC)."""

    config: NetworkConfig
    n_quantiles: int | None = None

    @nn.compact
    def __call__(
        self, obs: jax.Array, action: jax.Array, train: bool = False, dropout: bool = False, plain_layout: bool = False
    ) -> jax.Array:
        x = jnp.concatenate([obs, action], axis=-1)
        x = make_trunk(self.config)(x, train=train, dropout=dropout, plain_layout=plain_layout)
        if self.n_quantiles is None:
            return nn.Dense(1, name="q")(x).squeeze(-1)  # [B]
        return nn.Dense(self.n_quantiles, name="q")(x)  # [B, n_quantiles]


class CriticEnsemble(nn.Module):
    """`n_critics` independent Q networks evaluated on the same inputs: output [n_critics, B], or
    [n_critics, B, n_quantiles] with quantile critics.

    Parameters, BatchRenorm statistics and dropout masks are split across members, so each critic is
    initialised, normalised and regularised independently, while the ensemble is one batched computation.
    """

    config: NetworkConfig
    n_critics: int = 2
    n_quantiles: int | None = None

    @nn.compact
    def __call__(
        self, obs: jax.Array, action: jax.Array, train: bool = False, dropout: bool = False, plain_layout: bool = False
    ) -> jax.Array:
        in_axes = None
        if plain_layout:
            # One copy of the inputs per critic: with inputs shared across the ensemble, the kernel
            # gradient of the first layer would be a product whose operand carries the critic axis
            # among its free axes, a form XLA:CPU has no bfloat16 kernel for.
            obs, action = (jnp.broadcast_to(v, (self.n_critics, *v.shape)) for v in (obs, action))
            in_axes = 0
        ensemble = nn.vmap(
            QNetwork,
            variable_axes={"params": 0, "batch_stats": 0, KERNELS_T: 0},
            split_rngs={"params": True, "dropout": True},
            in_axes=(in_axes, in_axes, None, None, None),
            out_axes=0,
            axis_size=self.n_critics,
        )
        # Flags go positionally: lifted vmap drops keyword arguments (with only a warning).
        return ensemble(self.config, self.n_quantiles, name="critics")(obs, action, train, dropout, plain_layout)
