"""EnvPool stepped inside a compiled program through its XLA interface (`--vec-env envpool-xla`): the device
loop on EnvPool's MuJoCo, DeepMind Control and classic-control envs.

- One synchronous pool per seed, each env seeded as the host loop seeds it (env j of seed s: s + j), so a
  seed's envs step as that seed's single run would, whatever runs beside them.
- EnvPool resets an env on the step *after* its episode ends: that step ignores the action and returns the
  reset observation with reward 0. Its shapes are static (every call steps every env of the pool), so the
  reset cannot happen on the ending step as the host loop's adapter does it. Here: when every env of a pool
  ended on a step (a pool of one env always; envs that share a time limit), the pool takes its reset step at
  once, inside the same vector step, and nothing is lost. Otherwise the envs that ended take their reset step
  with the next vector step, which acts on their final observation in vain: that step is marked not `valid`
  and reaches no buffer, Monitor file, evaluation or episode length, but it is an env step of the run's count.
- The pool's C++ state cannot be saved: a resume starts new episodes (pools seeded from the env steps taken, as
  the host loop reseeds envs it cannot replay), so such a resume is not bit-exact.
- EnvPool's custom calls name their pool's address: a program traced on these pools steps them and no others.
  Pools are therefore made once, by the first `reset`; later ones restart the episodes in the same pools, so an
  evaluation's envs are seeded at the run's first evaluation and continue their own random streams after it.
- EnvPool computes in float64, which JAX enables only around the custom calls (`jax.enable_x64`); actions are
  clipped to [-1, 1] and mapped to the bounds with gymnasium's RescaleAction arithmetic, in float64 as the host
  loop's adapter does it, so both loops pass the env the same bits.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.typing import ArrayLike

from rlbench.envs.envpool_vector import MAX_SEED, EnvPoolVectorEnv, import_envpool, task_id
from rlbench.envs.jax_native.vector import EnvCarry, EnvStep
from rlbench.errors import ConfigError
from rlbench.types import EnvSpec

# EnvPool's traced step: (handle, actions [n_envs, action_dim], env ids [n_envs] int32) -> (handle, its outputs)
StepFn = Callable[[jax.Array, jax.Array, ArrayLike], tuple[jax.Array, tuple[Any, ...]]]


class PoolState(NamedTuple):
    """EnvCarry.state of a pool: the handle that orders its custom calls, and which envs ended on the last step
    and take their reset step with the next one."""

    handle: jax.Array  # [(n_seeds,) 8] uint8
    resetting: jax.Array  # [(n_seeds,) n_envs] bool


class EnvPoolXla:
    """The pools of a run's seeds ([(n_seeds,) n_envs] envs in the device loop's layout) and their traced step."""

    saves_envs = False  # nothing of a pool's state can be saved in a checkpoint
    has_reset_steps = True

    def __init__(self, env_id: str, env_kwargs: Mapping[str, Any], n_seeds: int, n_envs: int):
        self.env_id, self.env_kwargs, self.n_seeds, self.n_envs = env_id, dict(env_kwargs), n_seeds, n_envs
        probe = EnvPoolVectorEnv(env_id, 1, env_kwargs)
        try:
            if probe.n_actions:
                raise ConfigError(f"--vec-env envpool-xla: {env_id} has Discrete actions; use --vec-env envpool")
            space = probe.original_action_space
            obs_dim = int(probe.single_observation_space.shape[0])
            self.spec = EnvSpec(obs_dim=obs_dim, action_dim=int(np.prod(space.shape)))
            self._gradient, self._intercept = _rescaling(space.low, space.high, space.dtype)
        finally:
            probe.close()
        self._pools: list[Any] = []
        self._steps: list[StepFn] = []

    def reset(self, seeds: ArrayLike) -> EnvCarry:
        """The first call makes the pools, env j of seed s from seeds[s, j], and starts their first episodes; a
        later one starts new episodes in the same pools (`restart`: a pool's seeds are fixed when it is made,
        and a program traced on it steps no other). A host call."""
        if self._pools:
            return self.restart()
        flat = np.asarray(seeds).reshape(self.n_seeds, self.n_envs)
        envpool = import_envpool(self.env_id)
        with warnings.catch_warnings():  # gymnasium's Box on EnvPool's float64 bounds: "precision lowered"
            warnings.filterwarnings("ignore", message=".*precision lowered", category=UserWarning)
            for row in flat:
                pool = envpool.make_gymnasium(
                    task_id(self.env_id),
                    num_envs=self.n_envs,
                    batch_size=self.n_envs,
                    seed=[int(seed) % (MAX_SEED + 1) for seed in row],  # EnvPool's are int32
                    **self.env_kwargs,
                )
                with jax.enable_x64(True):  # the custom calls' types are fixed here: EnvPool's float64
                    handle, _, _, step = pool.xla()
                self._pools.append((pool, handle))
                self._steps.append(step)
        return self.restart()

    def restart(self) -> EnvCarry:
        """New episodes in every env of the pools, continuing each env's own random stream (host call)."""
        obs = [np.asarray(pool.reset()[0], np.float32) for pool, _ in self._pools]
        handles = [np.asarray(handle) for _, handle in self._pools]
        zeros = np.zeros((self.n_seeds, self.n_envs))
        carry = EnvCarry(
            state=PoolState(jnp.asarray(np.stack(handles)), jnp.asarray(zeros, bool)),
            obs=jnp.asarray(np.stack(obs)),
            key=jnp.asarray(zeros, jnp.uint32),  # unused: the pools draw their own randomness
            elapsed=jnp.asarray(zeros, jnp.int32),
        )
        return carry if self.n_seeds > 1 else jax.tree.map(lambda leaf: leaf[0], carry)

    def step(self, envs: EnvCarry, actions: jax.Array) -> tuple[EnvCarry, EnvStep, jax.Array]:
        """(envs, step, valid) of one vector step of every seed's pool, actions [(n_seeds,) n_envs, action_dim]
        in [-1, 1]; `valid` is False where an env took its reset step (traced)."""
        if self.n_seeds == 1:
            return self._step_pool(0, envs, actions)
        stepped = [self._step_pool(s, _seed_slice(envs, s), actions[s]) for s in range(self.n_seeds)]
        out: tuple[EnvCarry, EnvStep, jax.Array] = jax.tree.map(lambda *xs: jnp.stack(xs), *stepped)
        return out

    def _step_pool(self, index: int, envs: EnvCarry, actions: jax.Array) -> tuple[EnvCarry, EnvStep, jax.Array]:
        step, ids = self._steps[index], np.arange(self.n_envs, dtype=np.int32)
        state = envs.state
        assert isinstance(state, PoolState), "an EnvPool carry holds its pool's handle"
        unit = jnp.clip(jnp.asarray(actions, jnp.float32).reshape(self.n_envs, -1), -1.0, 1.0)
        with jax.enable_x64(True):
            # RescaleAction's map from [-1, 1] in the space's dtype, as the host loop's adapter applies it
            in_bounds = (unit.astype(self._gradient.dtype) - self._intercept) / self._gradient
            handle, (obs, reward, terminated, truncated, _) = step(state.handle, in_bounds, ids)
            valid = ~state.resetting
            ended = (terminated | truncated) & valid

            def reset_now() -> tuple[jax.Array, jax.Array]:  # every env ended: the pool's reset step at once
                reset_handle, reset = step(handle, jnp.zeros_like(in_bounds), ids)
                return reset_handle, reset[0].astype(jnp.float32)

            handle, next_obs = jax.lax.cond(ended.all(), reset_now, lambda: (handle, obs.astype(jnp.float32)))
        final_obs = obs.astype(jnp.float32)
        all_reset = ended.all()
        elapsed = jnp.where(valid & ~all_reset, envs.elapsed + 1, 0).astype(jnp.int32)
        carry = EnvCarry(PoolState(handle, ended & ~all_reset), next_obs, envs.key, elapsed)
        reward = jnp.where(valid, reward.astype(jnp.float32), 0.0)
        stepped = EnvStep(next_obs, final_obs, reward, terminated & valid, truncated & valid & ~terminated)
        return carry, stepped, valid

    def close(self) -> None:
        for pool, _ in self._pools:
            pool.close()


def _seed_slice(envs: EnvCarry, seed: int) -> EnvCarry:
    sliced: EnvCarry = jax.tree.map(lambda leaf: leaf[seed], envs)
    return sliced


def _rescaling(low: np.ndarray, high: np.ndarray, dtype: np.dtype[Any]) -> tuple[np.ndarray, np.ndarray]:
    """(gradient, intercept) of gymnasium's rescale_box from [low, high] to [-1, 1], in the action space's dtype
    (EnvPool's: float64 for MuJoCo, float32 for Pendulum) as it computes them: an action in [-1, 1] maps back as
    (action - intercept) / gradient, the host loop's adapter's `_rescaled`."""
    span = np.asarray(high, np.longdouble) - np.asarray(low, np.longdouble)
    gradient = (np.float32(2.0) / span).astype(dtype)
    intercept = gradient * -np.asarray(low, dtype) + np.float32(-1.0)
    return gradient, intercept.astype(dtype)
