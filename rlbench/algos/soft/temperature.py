"""The SAC temperature alpha, shared by SAC, DroQ, CrossQ and TQC: learned on log alpha, or fixed."""

from __future__ import annotations

from dataclasses import dataclass

import jax
import jax.numpy as jnp
from flax.training.train_state import TrainState

from rlbench.algos.common.losses import TemperatureLoss, temperature_loss
from rlbench.algos.common.steps import apply_loss, make_adam

# The `temperature_loss` setting: the weight of (H - H_target) in the temperature's loss (losses.py).
TEMPERATURE_LOSSES: dict[TemperatureLoss, str] = {
    "log_alpha": "SB3's, and SBX's since 0.18",
    "alpha": "SBX's before 0.18",
}


@dataclass(frozen=True)
class EntropyCoef:
    """The temperature alpha: learned from `initial` (ent_coef auto / auto_<x>) or fixed."""

    initial: float = 1.0
    learned: bool = True


def init_temperature(initial: float, learned: bool, learning_rate: float) -> TrainState | None:
    """{"log_alpha": log(initial)} with its own Adam, or None for a fixed alpha (no parameter, no step)."""
    if not learned:
        return None
    log_alpha = {"log_alpha": jnp.log(jnp.asarray(initial, jnp.float32))}
    # flax leaves TrainState.create unannotated; it returns a TrainState.
    state: TrainState = TrainState.create(apply_fn=None, params=log_alpha, tx=make_adam(learning_rate))
    # An int32 array rather than TrainState's Python 0, so both lax.cond branches agree on types.
    return state.replace(step=jnp.zeros((), jnp.int32))


def current_alpha(temperature: TrainState | None, fixed_value: float) -> jax.Array:
    """alpha = exp(log_alpha) when learned, else the fixed coefficient."""
    if temperature is None:
        return jnp.asarray(fixed_value, jnp.float32)
    return jnp.exp(temperature.params["log_alpha"])


def temperature_step(
    temperature: TrainState | None, entropy: jax.Array, target_entropy: float, loss: TemperatureLoss = "log_alpha"
) -> tuple[TrainState | None, jax.Array]:
    """One Adam step on log alpha toward the target entropy, on the `loss` of TEMPERATURE_LOSSES; a fixed
    alpha is returned unchanged."""
    if temperature is None:  # static
        return None, jnp.zeros(())
    temperature, value, _ = apply_loss(
        temperature, lambda p: (temperature_loss(p["log_alpha"], entropy, target_entropy, loss), None)
    )
    return temperature, value
