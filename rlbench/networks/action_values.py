"""The value network of the value-based learners (DQN, QR-DQN): Q(s, .) of every discrete action in one pass."""

from __future__ import annotations

import flax.linen as nn
import jax

from rlbench.networks.mlp import NetworkConfig
from rlbench.networks.nature_cnn import Features, extract
from rlbench.networks.trunk import make_trunk


class ActionValues(nn.Module):
    """obs [B, obs_dim] -> Q [B, n_actions]; with `n_quantiles`, [B, n_quantiles, n_actions] quantiles of each
    action's return (QR-DQN, in SB3-contrib's layout). The features (CnnPolicy: NatureCNN over the image of
    `image_shape`), the trunk and one linear output, as SB3's QNetwork."""

    config: NetworkConfig
    n_actions: int
    n_quantiles: int | None = None
    features: Features = Features()
    image_shape: tuple[int, ...] = ()

    @nn.compact
    def __call__(
        self, obs: jax.Array, train: bool = False, dropout: bool = False, plain_layout: bool = False
    ) -> jax.Array:
        x = extract(self.features, self.image_shape, obs)
        x = make_trunk(self.config)(x, train=train, dropout=dropout, plain_layout=plain_layout)
        if self.n_quantiles is None:
            return nn.Dense(self.n_actions, name="q")(x)
        q = nn.Dense(self.n_quantiles * self.n_actions, name="q")(x)
        return q.reshape(*q.shape[:-1], self.n_quantiles, self.n_actions)
