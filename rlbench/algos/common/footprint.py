"""What one training iteration of an actor-critic learner keeps alive besides its state: an upper estimate
for the memory check before a run starts (rlbench.run.memory), from the config alone."""

from __future__ import annotations

from rlbench.algos.common.config import ActorCriticConfig
from rlbench.algos.common.fused import steps_per_update
from rlbench.networks.trunk import trunk_units
from rlbench.types import EnvSpec

FLOAT_BYTES = 4
# Per hidden unit and batch row, a gradient step keeps the pre-activation, the activation and their
# gradients (4 values), and normalisation layers about as much again: 8 is a safe upper estimate.
ACTIVATION_VALUES_PER_UNIT = 8


def update_activation_bytes(cfg: ActorCriticConfig, spec: EnvSpec) -> int:
    """An upper estimate of one training iteration's temporaries: the sampled batches of every gradient
    step, and one step's activations (CrossQ's critic sees obs and next_obs in one pass: twice the rows)."""
    row = 2 * spec.obs_dim + spec.action_dim + 2
    batches = steps_per_update(cfg) * cfg.batch_size * row * FLOAT_BYTES
    critic_rows = cfg.batch_size * (2 if cfg.critic.batch_norm else 1)
    critic_units = cfg.n_critics * (trunk_units(cfg.critic) + 1)
    actor_units = trunk_units(cfg.actor) + 2 * spec.action_dim
    per_step = (critic_rows * critic_units + 2 * cfg.batch_size * actor_units) * ACTIVATION_VALUES_PER_UNIT
    return batches + per_step * FLOAT_BYTES
