"""PPO's hyperparameters (Schulman et al. 2017, https://arxiv.org/abs/1707.06347) with SB3's defaults,
and A2C (Mnih et al. 2016) as a preset of them.

A2C is PPO with one epoch of one full-rollout minibatch per rollout: the update's single gradient step
is taken at the parameters that collected the rollout, so the ratio pi/pi_old is exactly 1 there, the
clipped surrogate -min(r A, clip(r) A) has the gradient -A grad(r) = -A grad(log pi) (r = 1 lies inside
[1 - eps, 1 + eps], where both branches agree), and PPO's loss has A2C's gradient
(tests/unit/test_ppo.py checks it). The rest of A2C is settings: n_steps 5, gae_lambda 1 (n-step returns),
no advantage normalization, RMSprop.

RMSprop: SB3's A2C uses torch.optim.RMSprop(alpha=0.99, eps=1e-5), which divides by sqrt(v) + eps;
optax.rmsprop's default divides by sqrt(v + eps) (eps_in_sqrt=True, TensorFlow's placement, which SB3
offers as RMSpropTFLike). `make_optimizer` passes eps_in_sqrt=False to match PyTorch; both start v at 0.
RMSpropTFLike (the optimizer class RL Zoo's A2C atari entry names) keeps TensorFlow's placement and
starts v at 1, as TensorFlow's RMSprop does (SB3's sb2_compat.rmsprop_tf_like).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Literal

import optax

from rlbench.algos.common.config import LearnerConfig
from rlbench.algos.common.schedules import ConstantSchedule, Schedule
from rlbench.networks.actor_critic import ActorCriticNetConfig

# "rmsprop": PyTorch's RMSprop (SB3's A2C); "rmsprop_tf": SB3's RMSpropTFLike.
Optimizer = Literal["adam", "rmsprop", "rmsprop_tf"]


@dataclass(frozen=True, kw_only=True)
class PPOConfig(LearnerConfig):
    """SB3's PPO defaults. `batch_size` None: one minibatch of the whole rollout (A2C)."""

    n_steps: int = 2048  # vector steps per rollout
    rollout_envs: int = 1  # n_envs of each seed: a rollout holds n_steps * rollout_envs samples
    batch_size: int | None = 64
    n_epochs: int = 10
    gae_lambda: float = 0.95
    clip_range: Schedule = ConstantSchedule(0.2)  # noqa: RUF009
    clip_range_vf: Schedule | None = None  # None: the value loss is not clipped
    normalize_advantage: bool = True
    ent_coef: float = 0.0
    vf_coef: float = 0.5
    max_grad_norm: float = 0.5
    target_kl: float | None = None  # stop the update once a minibatch's approx_kl > 1.5 * target_kl
    use_sde: bool = False  # gSDE: state-dependent exploration with held matrices (Box actions)
    sde_sample_freq: int = -1  # new matrices every n vector steps of a rollout; -1: at each rollout's start only
    optimizer: Optimizer = "adam"
    optimizer_eps: float = 1e-5  # SB3's ActorCriticPolicy sets Adam's eps to 1e-5; A2C's rms_prop_eps
    rms_prop_alpha: float = 0.99  # RMSprop's decay of the squared-gradient average (A2C)
    network: ActorCriticNetConfig = field(default_factory=ActorCriticNetConfig)

    def __post_init__(self) -> None:
        if not 0.0 <= self.gae_lambda <= 1.0:
            raise ValueError(f"gae_lambda must be in [0, 1], got {self.gae_lambda}")
        if self.n_epochs < 1 or self.n_steps < 1:
            raise ValueError(f"n_epochs and n_steps must be >= 1, got {self.n_epochs} and {self.n_steps}")


def a2c_config(**overrides: object) -> PPOConfig:
    """SB3's A2C defaults as a PPOConfig; `overrides` replace fields (RL Zoo's entries)."""
    preset = PPOConfig(
        learning_rate=ConstantSchedule(7e-4),
        n_steps=5,
        batch_size=None,
        n_epochs=1,
        gae_lambda=1.0,
        normalize_advantage=False,
        optimizer="rmsprop",
    )
    return replace(preset, **overrides)  # type: ignore[arg-type]  # field names are checked by replace


def minibatch_size(cfg: PPOConfig, rollout_size: int) -> int:
    """The samples per gradient step for a rollout of `rollout_size` (n_steps * n_envs) samples: batch_size,
    or the whole rollout (A2C). One that does not divide the rollout ends each epoch with a smaller minibatch,
    as SB3's (rlbench.algos.ppo.update pads it to this size)."""
    size = rollout_size if cfg.batch_size is None else cfg.batch_size
    if not 1 <= size <= rollout_size:
        raise ValueError(f"batch_size {size} must be in [1, the rollout's {rollout_size} samples]")
    return size


def make_optimizer(cfg: PPOConfig) -> optax.GradientTransformation:
    """Gradient clipping to max_grad_norm, then Adam, PyTorch-style RMSprop or RMSpropTFLike, with the learning rate a
    leaf of the state (`inject_hyperparams`) so a schedule needs no recompile."""

    def chain(learning_rate: float) -> optax.GradientTransformation:
        if cfg.optimizer == "rmsprop":
            step = optax.rmsprop(learning_rate, decay=cfg.rms_prop_alpha, eps=cfg.optimizer_eps, eps_in_sqrt=False)
        elif cfg.optimizer == "rmsprop_tf":
            step = optax.rmsprop(learning_rate, decay=cfg.rms_prop_alpha, eps=cfg.optimizer_eps, initial_scale=1.0)
        else:
            step = optax.adam(learning_rate, eps=cfg.optimizer_eps)
        return optax.chain(optax.clip_by_global_norm(cfg.max_grad_norm), step)

    return optax.inject_hyperparams(chain)(learning_rate=cfg.learning_rate.initial)
