"""The SAC family's config (SAC, DroQ, TQC, CrossQ): the shared fields plus the entropy temperature, its
target and gSDE (state-dependent exploration). The keys that set them: rlbench/config/algorithms/soft.py."""

from __future__ import annotations

from dataclasses import dataclass

from rlbench.algos.common.config import ActorCriticConfig
from rlbench.algos.common.losses import TemperatureLoss
from rlbench.algos.soft.temperature import EntropyCoef
from rlbench.networks.actor import GSDEConfig
from rlbench.types import EnvSpec


@dataclass(frozen=True, kw_only=True)
class SoftConfig(ActorCriticConfig):
    """The fields of the maximum-entropy learners: a stochastic actor with a temperature."""

    ent_coef: EntropyCoef = EntropyCoef()  # noqa: RUF009 (frozen)
    temperature_loss: TemperatureLoss = "log_alpha"  # the learned temperature's loss: a key of TEMPERATURE_LOSSES
    target_entropy: float | None = None  # None -> -dim(A)
    gsde: GSDEConfig | None = None  # use_sde: state-dependent exploration (networks/actor.py)


@dataclass(frozen=True, kw_only=True)
class TargetCriticConfig(SoftConfig):
    """The fields of the SAC family's learners with Polyak-averaged target critics (SAC, DroQ, TQC; CrossQ has
    none): the config rlbench/algos/soft/learner.py reads."""

    tau: float = 0.005  # Polyak rate of the target critics
    target_update_interval: int = 1  # gradient steps between Polyak updates of the target critics


def target_entropy(cfg: SoftConfig, spec: EnvSpec) -> float:
    """-dim(A) unless set."""
    return -float(spec.action_dim) if cfg.target_entropy is None else cfg.target_entropy
