"""RL Zoo's `normalize` on the host: SB3's VecNormalize running statistics, one set per seed, and how
they are saved and read back.

Observations: the running mean and variance of every observation the training envs return (after the
first reset, then after each step, which for an ended episode is the first observation of the next),
each vector step's batch merged in with the parallel algorithm (Chan et al. 1979), as SB3's
RunningMeanStd, whose count starts at 1e-4 (mean 0, variance 1):

    delta = batch_mean - mean,  n = count + batch_count
    mean' = mean + delta * batch_count / n
    var'  = (var * count + batch_var * batch_count + delta^2 * count * batch_count / n) / n

Rewards: the same for the discounted return of each env, R = gamma * R + reward, reset to 0 when its
episode ends; rewards are divided by sqrt(var(R) + epsilon). As in SB3, the return statistics move even
when only observations are normalised. The statistics move only while training, and are kept in float64
(as SB3's); the device gets them as float32 (`Normalization`) and applies them
(rlbench.buffers.normalization), frozen, in evaluation and in enjoy.py.

They are saved per seed in every checkpoint (members `normalize/<name>.npy`) and at the end of a run
beside the final model, as `<run>/<env>/vecnormalize.npz` (RL Zoo's vecnormalize.pkl, without pickle).
Read back, they are untrusted input: each array's shape, dtype and values are checked before use.
"""

from __future__ import annotations

import io
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import numpy.typing as npt

from rlbench.buffers.normalization import Normalization, NormalizeConfig
from rlbench.files import atomic_write_bytes

COUNT_EPSILON = 1e-4  # SB3's RunningMeanStd starts from this count, so the first batch barely sees the prior
STATS_FILE = "vecnormalize.npz"


class MissingStatsError(ValueError):
    """A model trained with `normalize` whose file holds no statistics (RELIABILITY B10)."""


Float64Array = npt.NDArray[np.float64]


class RunningMeanStd:
    """SB3's RunningMeanStd for independent streams, one per seed: mean and var [n_seeds, *shape], count [n_seeds]."""

    def __init__(self, n_seeds: int, shape: tuple[int, ...]):
        self.mean = np.zeros((n_seeds, *shape))
        self.var = np.ones((n_seeds, *shape))
        self.count = np.full(n_seeds, COUNT_EPSILON)

    def update(self, batch: np.ndarray) -> None:
        """Merge in one batch per seed: [n_seeds, batch_count, *shape]. The statistics are new arrays after
        each update, never changed in place (VecNormalizeStats.device keys its cache on them)."""
        batch = np.asarray(batch, np.float64)
        batch_count = batch.shape[1]
        if batch_count == 1:  # one env: numpy's mean and var of one value, exactly, without their cost per step
            batch_mean, batch_var = batch[:, 0], np.zeros_like(batch[:, 0])
        else:
            batch_mean, batch_var = batch.mean(axis=1), batch.var(axis=1)
        count = self.count.reshape(-1, *([1] * (self.mean.ndim - 1)))  # broadcast over the stream's shape
        delta = batch_mean - self.mean
        total = count + batch_count
        self.mean = self.mean + delta * batch_count / total
        m_2 = self.var * count + batch_var * batch_count + np.square(delta) * count * batch_count / total
        self.var = m_2 / total
        self.count = self.count + batch_count


@dataclass
class VecNormalizeStats:
    """The statistics of a run's seeds: observations [n_seeds, obs_dim], returns [n_seeds], and each env's
    discounted return so far [n_seeds, n_envs]."""

    config: NormalizeConfig
    obs: RunningMeanStd
    ret: RunningMeanStd
    returns: Float64Array
    # device()'s last value and the statistics it was made from: read several times per env step (acting,
    # staging), it changes only when they do
    _frozen: tuple[tuple[np.ndarray, ...], Normalization] | None = field(
        default=None, init=False, repr=False, compare=False
    )
    # scaled_obs()'s last (observations, statistics, result): the host loop scales the observations it acts on,
    # then stages that array, and the ones a step returned are the next step's (rlbench.loop.collect)
    _scaled: tuple[np.ndarray, Normalization, np.ndarray] | None = field(
        default=None, init=False, repr=False, compare=False
    )

    @classmethod
    def new(cls, config: NormalizeConfig, n_seeds: int, n_envs: int, obs_dim: int) -> VecNormalizeStats:
        return cls(
            config, RunningMeanStd(n_seeds, (obs_dim,)), RunningMeanStd(n_seeds, ()), np.zeros((n_seeds, n_envs))
        )

    def observe_reset(self, obs: np.ndarray) -> None:
        """The first observations of a run, [n_seeds, n_envs, obs_dim] (VecNormalize.reset)."""
        if self.config.norm_obs:
            self.obs.update(obs)

    def observe_step(self, obs: np.ndarray, reward: np.ndarray, done: np.ndarray) -> None:
        """One vector step's returned observations [n_seeds, n_envs, obs_dim] (for an env whose episode
        ended: the next episode's first), rewards and episode ends [n_seeds, n_envs] (VecNormalize.step_wait)."""
        if self.config.norm_obs:
            self.obs.update(obs)
        self.returns = self.returns * self.config.gamma + reward
        self.ret.update(self.returns)
        self.returns[done] = 0.0

    def restart_episode(self, seed_index: int, env_index: int) -> None:
        """An env starts a new episode outside `observe_step` (it could not be restored on resume)."""
        self.returns[seed_index, env_index] = 0.0

    def device(self) -> Normalization:
        """The frozen statistics, as the device applies them (float32, with the seed axis)."""
        made_from = (self.obs.mean, self.obs.var, self.ret.var)
        if self._frozen is None or any(now is not then for now, then in zip(made_from, self._frozen[0], strict=True)):
            self._frozen = (made_from, self._frozen_now())
        return self._frozen[1]

    def _frozen_now(self) -> Normalization:
        cfg = self.config
        obs_mean = self.obs.mean.astype(np.float32) if cfg.norm_obs else None
        obs_std = np.sqrt(self.obs.var + cfg.epsilon).astype(np.float32) if cfg.norm_obs else None
        reward_std = np.sqrt(self.ret.var + cfg.epsilon).astype(np.float32) if cfg.norm_reward else None
        # numpy float32 arrays, which jit takes as jax.Arrays: Normalization's fields are typed jax.Array only.
        return Normalization(
            obs_mean=obs_mean,  # type: ignore[arg-type]
            obs_std=obs_std,  # type: ignore[arg-type]
            reward_std=reward_std,  # type: ignore[arg-type]
            clip_obs=cfg.clip_obs,
            clip_reward=cfg.clip_reward,
        )

    def scaled_obs(self, obs: np.ndarray) -> np.ndarray:
        """Observations [n_seeds, n_envs, obs_dim] scaled with the statistics as they are now, in float32 with
        the float32 statistics of `device()`: what an on-policy learner acts on and stores (SB3's VecNormalize
        gives PPO its scaled observations). Asked again for the same array with the same statistics, it returns
        the same result without computing it: `obs` must not change in place once scaled (the loop's never do)."""
        stats = self.device()
        if stats.obs_mean is None:
            return obs
        if self._scaled is not None and self._scaled[0] is obs and self._scaled[1] is stats:
            return self._scaled[2]
        assert stats.obs_std is not None, "obs_mean and obs_std are set together"
        scaled = (obs.astype(np.float32) - stats.obs_mean[:, None]) / stats.obs_std[:, None]
        scaled = np.clip(scaled, -stats.clip_obs, stats.clip_obs)
        self._scaled = (obs, stats, scaled)
        return scaled

    def scaled_rewards(self, reward: np.ndarray) -> np.ndarray:
        """Rewards [n_seeds, n_envs] scaled as VecNormalize scales them (float64, then float32), as they are now."""
        if not self.config.norm_reward:
            return reward
        scaled = reward / np.sqrt(self.ret.var[:, None] + self.config.epsilon)
        return np.clip(scaled, -self.config.clip_reward, self.config.clip_reward).astype(np.float32)

    def scale_reward(self, reward: float, seed_index: int = 0) -> float:
        """Rewards divided by sqrt(var(R) + epsilon) and clipped (VecNormalize.normalize_reward), frozen."""
        scaled = reward / np.sqrt(self.ret.var[seed_index] + self.config.epsilon)
        return np.clip(scaled, -self.config.clip_reward, self.config.clip_reward)

    # -- saved and read back --------------------------------------------------------------------------

    def to_arrays(self, seed_index: int) -> dict[str, Float64Array]:
        """Seed `seed_index`'s statistics as a checkpoint holds them (float64 arrays)."""
        return {
            "obs_mean": self.obs.mean[seed_index],
            "obs_var": self.obs.var[seed_index],
            "obs_count": np.asarray(self.obs.count[seed_index]),
            "ret_mean": np.asarray(self.ret.mean[seed_index]),
            "ret_var": np.asarray(self.ret.var[seed_index]),
            "ret_count": np.asarray(self.ret.count[seed_index]),
            "returns": self.returns[seed_index],
        }

    @classmethod
    def from_arrays(
        cls, config: NormalizeConfig, saved: Sequence[Mapping[str, np.ndarray]], obs_dim: int, n_envs: int | None
    ) -> VecNormalizeStats:
        """The statistics of `len(saved)` seeds from each one's arrays (`to_arrays`); ValueError naming the
        first array that is missing or does not fit. `n_envs` None: the running returns are not read
        (acting needs none), and start at 0 for one env."""
        shapes = expected_shapes(obs_dim, n_envs)
        for arrays in saved:
            check_arrays(arrays, shapes)
        stats = cls.new(config, len(saved), n_envs or 1, obs_dim)
        for index, arrays in enumerate(saved):
            stats.obs.mean[index], stats.obs.var[index], stats.obs.count[index] = (
                arrays["obs_mean"],
                arrays["obs_var"],
                arrays["obs_count"],
            )
            stats.ret.mean[index], stats.ret.var[index], stats.ret.count[index] = (
                arrays["ret_mean"],
                arrays["ret_var"],
                arrays["ret_count"],
            )
            if n_envs is not None:
                stats.returns[index] = arrays["returns"]
        return stats

    def save(self, path: Path, seed_index: int) -> None:
        """Seed `seed_index`'s statistics and settings as an .npz of plain arrays (no pickle), atomically."""
        arrays = {name: value for name, value in self.to_arrays(seed_index).items() if name != "returns"}
        cfg = self.config
        settings = {
            "norm_obs": np.asarray(cfg.norm_obs),
            "norm_reward": np.asarray(cfg.norm_reward),
            **{
                name: np.asarray(getattr(cfg, name), np.float64)
                for name in ("clip_obs", "clip_reward", "gamma", "epsilon")
            },
        }
        buffer = io.BytesIO()
        np.savez(buffer, **arrays, **settings)  # type: ignore[arg-type]  # numpy's stub: a key could be allow_pickle
        atomic_write_bytes(path, buffer.getvalue())


def expected_shapes(obs_dim: int, n_envs: int | None) -> dict[str, tuple[int, ...]]:
    """Each saved array's shape (all float64); without `n_envs`, the running returns are not needed."""
    shapes = {
        "obs_mean": (obs_dim,),
        "obs_var": (obs_dim,),
        "obs_count": (),
        "ret_mean": (),
        "ret_var": (),
        "ret_count": (),
    }
    return shapes if n_envs is None else shapes | {"returns": (n_envs,)}


def check_arrays(arrays: Mapping[str, np.ndarray], shapes: Mapping[str, tuple[int, ...]]) -> None:
    """ValueError naming the first array that is missing, of another shape or dtype than float64, not
    finite, or an impossible statistic (a negative variance, a count below the initial 1e-4)."""
    missing = [name for name in shapes if name not in arrays]
    if missing:
        raise MissingStatsError(
            f"missing normalization stats: no {', '.join(f'normalize/{name}.npy' for name in missing)}"
        )
    for name, shape in shapes.items():
        value = arrays[name]
        if value.dtype != np.float64 or value.shape != shape:
            raise ValueError(
                f"normalize/{name}.npy holds {value.dtype}{list(value.shape)}, expected float64{list(shape)}"
            )
        if not np.isfinite(value).all():
            raise ValueError(f"normalize/{name}.npy holds NaN or inf")
        if name.endswith("_var") and (value < 0).any():
            raise ValueError(f"normalize/{name}.npy holds a negative variance")
        if name.endswith("_count") and value < COUNT_EPSILON:
            raise ValueError(f"normalize/{name}.npy holds {float(value)!r}, below the initial count {COUNT_EPSILON}")
