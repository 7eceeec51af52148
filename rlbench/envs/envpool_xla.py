"""EnvPool stepped inside a compiled program through its XLA interface (`--vec-env envpool-xla`): the device
loop on EnvPool's MuJoCo, DeepMind Control, classic-control and Atari envs.

- One synchronous pool per seed (an on-policy learner: one per env, below), each env seeded as the host loop
  seeds it (env j of seed s: s + j), so a seed's envs step as that seed's single run would, whatever runs beside
  them.
- EnvPool resets an env on the step *after* its episode ends: that step ignores the action and returns the
  reset observation with reward 0. Its shapes are static (every call steps every env of the pool), so the
  reset cannot happen on the ending step as the host loop's adapter does it. Here: when every env of a pool
  ended on a step (a pool of one env always; envs that share a time limit), the pool takes its reset step at
  once, inside the same vector step, and nothing is lost. Otherwise the envs that ended take their reset step
  with the next vector step, which acts on their final observation in vain: that step is marked not `valid`
  and reaches no buffer, Monitor file, evaluation or episode length, but it is an env step of the run's count.
  A rollout has a row for every env and vector step, so an on-policy learner's envs get a pool each: they
  never take a reset step of their own (EnvPool's threads then step one env per call).
- The pool's C++ state cannot be saved: a resume starts new episodes (pools seeded from the env steps taken, as
  the host loop reseeds envs it cannot replay), so such a resume is not bit-exact.
- EnvPool's custom calls name their pool's address: a program traced on these pools steps them and no others.
  Pools are therefore made once, by the first `reset`; later ones restart the episodes in the same pools, so an
  evaluation's envs are seeded at the run's first evaluation and continue their own random streams after it.
- Atari (RL Zoo's AtariWrapper and frame_stack as the pool's options: rlbench.envs.envpool_atari): frames stay
  uint8, channels last and flat, as on the host loop; with `report_games` each step reports its game (EnvPool's
  raw reward, game over) to the Monitor files and evaluations, while episodic life ends the learner's episodes at
  every life lost. A life lost is followed by EnvPool's own reset step, which continues the game.
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

from rlbench.envs.envpool_vector import MAX_SEED, EnvPoolVectorEnv, frames_channels_last, import_envpool, task_id
from rlbench.envs.images import FlatImageBox
from rlbench.envs.jax_native.vector import EnvCarry, EnvStep, Reported
from rlbench.types import EnvSpec

# EnvPool's traced step: (handle, actions [n_envs, action_dim], env ids [n_envs] int32) -> (handle, its outputs)
StepFn = Callable[[jax.Array, jax.Array, ArrayLike], tuple[jax.Array, tuple[Any, ...]]]


class PoolState(NamedTuple):
    """EnvCarry.state of a seed's pools: the handles that order their custom calls, and which envs ended on the
    last step and take their reset step with the next one."""

    handle: jax.Array  # [(n_seeds,) pools per seed, 8] uint8
    resetting: jax.Array  # [(n_seeds,) n_envs] bool


class EnvPoolXla:
    """The pools of a run's seeds ([(n_seeds,) n_envs] envs in the device loop's layout) and their traced step:
    each seed's envs in pools of `pool_size` (all of them unless `use_pools_of` says otherwise)."""

    saves_envs = False  # nothing of a pool's state can be saved in a checkpoint

    def __init__(
        self, env_id: str, env_kwargs: Mapping[str, Any], n_seeds: int, n_envs: int, report_games: bool = False
    ):
        self.env_id, self.env_kwargs, self.n_seeds, self.n_envs = env_id, dict(env_kwargs), n_seeds, n_envs
        self.pool_size, self.report_games = n_envs, report_games
        probe = EnvPoolVectorEnv(env_id, 1, env_kwargs)
        try:
            space, observations = probe.original_action_space, probe.single_observation_space
            self.n_actions, self.first_action = probe.n_actions, probe.first_action
            image_shape = observations.image_shape if isinstance(observations, FlatImageBox) else ()
            self.spec = EnvSpec(int(observations.shape[0]), int(np.prod(space.shape)), self.n_actions, image_shape)
            if not self.n_actions:
                self._gradient, self._intercept = _rescaling(space.low, space.high, space.dtype)
        finally:
            probe.close()
        self._pools: list[Any] = []
        self._steps: list[StepFn] = []

    @property
    def has_reset_steps(self) -> bool:
        """A pool of one env always takes its reset step inside the ending step: every step is a transition."""
        return self.pool_size > 1

    def use_pools_of(self, pool_size: int) -> None:
        """Pools of `pool_size` envs (1: an on-policy learner's rollout, which has a row for every env and step);
        before the pools are made."""
        assert not self._pools and self.n_envs % pool_size == 0, "pools divide each seed's envs, before reset"
        self.pool_size = pool_size

    def reset(self, seeds: ArrayLike) -> EnvCarry:
        """The first call makes the pools, env j of seed s from seeds[s, j], and starts their first episodes; a
        later one starts new episodes in the same pools (`restart`: a pool's seeds are fixed when it is made,
        and a program traced on it steps no other). A host call."""
        if self._pools:
            return self.restart()
        flat = np.asarray(seeds).reshape(-1, self.pool_size)
        envpool = import_envpool(self.env_id)
        with warnings.catch_warnings():  # gymnasium's Box on EnvPool's float64 bounds: "precision lowered"
            warnings.filterwarnings("ignore", message=".*precision lowered", category=UserWarning)
            for row in flat:
                pool = envpool.make_gymnasium(
                    task_id(self.env_id),
                    num_envs=self.pool_size,
                    batch_size=self.pool_size,
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
        obs = np.concatenate([self._observations(pool.reset()[0]) for pool, _ in self._pools])
        handles = np.stack([np.asarray(handle) for _, handle in self._pools])
        zeros = np.zeros((self.n_seeds, self.n_envs))
        carry = EnvCarry(
            state=PoolState(jnp.asarray(handles.reshape(self.n_seeds, -1, 8)), jnp.asarray(zeros, bool)),
            obs=jnp.asarray(obs.reshape(self.n_seeds, self.n_envs, -1)),  # an image's uint8, else float32
            key=jnp.asarray(zeros, jnp.uint32),  # unused: the pools draw their own randomness
            elapsed=jnp.asarray(zeros, jnp.int32),
        )
        return carry if self.n_seeds > 1 else jax.tree.map(lambda leaf: leaf[0], carry)

    def step(self, envs: EnvCarry, actions: jax.Array) -> tuple[EnvCarry, EnvStep, Reported]:
        """(envs, step, what it reports) of one vector step of every seed's pools, actions [(n_seeds,) n_envs,
        action_dim] in [-1, 1] (a Discrete env's index column); Reported.valid is False where an env took its reset
        step (traced)."""
        if self.n_seeds == 1:
            return self._step_seed(0, envs, actions)
        stepped = [self._step_seed(s, _sliced(envs, s), actions[s]) for s in range(self.n_seeds)]
        out: tuple[EnvCarry, EnvStep, Reported] = jax.tree.map(lambda *xs: jnp.stack(xs), *stepped)
        return out

    def _step_seed(self, seed: int, envs: EnvCarry, actions: jax.Array) -> tuple[EnvCarry, EnvStep, Reported]:
        size, per_seed = self.pool_size, self.n_envs // self.pool_size
        state = envs.state
        assert isinstance(state, PoolState), "an EnvPool carry holds its pools' handles"
        parts = []
        for index in range(per_seed):
            envs_of_pool = slice(index * size, (index + 1) * size)
            pool_envs = _sliced(envs._replace(state=None), envs_of_pool)
            pool_state = PoolState(state.handle[index], state.resetting[envs_of_pool])
            parts.append(self._step_pool(seed * per_seed + index, pool_envs, pool_state, actions[envs_of_pool]))
        carries, steps, reported = zip(*parts, strict=True)
        handles = jnp.stack([carry.state.handle for carry in carries])
        joined: EnvCarry = jax.tree.map(lambda *xs: jnp.concatenate(xs), *carries)  # handles: stacked instead
        joined = joined._replace(state=joined.state._replace(handle=handles))
        step: EnvStep = jax.tree.map(lambda *xs: jnp.concatenate(xs), *steps)
        report: Reported = jax.tree.map(lambda *xs: jnp.concatenate(xs), *reported)
        return joined, step, report

    def _pool_actions(self, actions: jax.Array) -> jax.Array:
        """The pool's actions from the learner's: an index (as EnvPool's int32, from its first action), or a Box
        action clipped to [-1, 1] and mapped to the bounds with RescaleAction's arithmetic in the space's dtype,
        as the host loop's adapter applies it. Traced under jax.enable_x64."""
        if self.n_actions:
            index = jnp.clip(jnp.rint(actions[:, 0]), 0, self.n_actions - 1).astype(jnp.int32)
            return index + jnp.int32(self.first_action)
        unit = jnp.clip(actions.astype(jnp.float32), -1.0, 1.0)
        return (unit.astype(self._gradient.dtype) - self._intercept) / self._gradient

    def _step_pool(
        self, index: int, envs: EnvCarry, state: PoolState, actions: jax.Array
    ) -> tuple[EnvCarry, EnvStep, Reported]:
        step, ids = self._steps[index], np.arange(self.pool_size, dtype=np.int32)
        with jax.enable_x64(True):
            pool_actions = self._pool_actions(jnp.asarray(actions).reshape(self.pool_size, -1))
            handle, (obs, reward, terminated, truncated, info) = step(state.handle, pool_actions, ids)
            valid = ~state.resetting
            ended = (terminated | truncated) & valid
            final_obs = self._observations(obs)

            def reset_now() -> tuple[jax.Array, jax.Array]:  # every env ended: the pool's reset step at once
                reset_handle, reset = step(handle, jnp.zeros_like(pool_actions), ids)
                return reset_handle, self._observations(reset[0])

            all_reset = ended.all()
            handle, next_obs = jax.lax.cond(all_reset, reset_now, lambda: (handle, final_obs))
        elapsed = jnp.where(valid & ~all_reset, envs.elapsed + 1, 0).astype(jnp.int32)
        carry = EnvCarry(PoolState(handle, ended & ~all_reset), next_obs, envs.key, elapsed)
        reward = jnp.where(valid, reward.astype(jnp.float32), 0.0)
        stepped = EnvStep(next_obs, final_obs, reward, terminated & valid, truncated & valid & ~terminated)
        if not self.report_games:
            return carry, stepped, Reported(valid, reward, ended)
        # A game: EnvPool's info["reward"] is the raw reward, info["terminated"] the game's end (the step's own
        # `terminated` is a life's with episodic_life), as the host loop's adapter reads them.
        game_over = ((info["terminated"] != 0) | truncated) & valid
        return carry, stepped, Reported(valid, jnp.where(valid, info["reward"].astype(jnp.float32), 0.0), game_over)

    def _observations(self, obs: Any) -> Any:
        """The pool's observations as the loops take them: an image's frames channels last and flat, uint8 (as the
        host loop's adapter hands them on); anything else float32. numpy in, numpy out; traced in, traced out."""
        return frames_channels_last(obs) if self.spec.image_shape else obs.astype(np.float32)

    def close(self) -> None:
        for pool, _ in self._pools:
            pool.close()


def _sliced(envs: EnvCarry, index: int | slice) -> EnvCarry:
    """Every leaf's [index]: one seed's envs, or one pool's of a seed."""
    sliced: EnvCarry = jax.tree.map(lambda leaf: leaf[index], envs)
    return sliced


def _rescaling(low: np.ndarray, high: np.ndarray, dtype: np.dtype[Any]) -> tuple[np.ndarray, np.ndarray]:
    """(gradient, intercept) of gymnasium's rescale_box from [low, high] to [-1, 1], in the action space's dtype
    (EnvPool's: float64 for MuJoCo, float32 for Pendulum) as it computes them: an action in [-1, 1] maps back as
    (action - intercept) / gradient, the host loop's adapter's `_rescaled`."""
    span = np.asarray(high, np.longdouble) - np.asarray(low, np.longdouble)
    gradient = (np.float32(2.0) / span).astype(dtype)
    intercept = gradient * -np.asarray(low, dtype) + np.float32(-1.0)
    return gradient, intercept.astype(dtype)
