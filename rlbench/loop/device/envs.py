"""The envs a device-loop program steps, whatever steps them: JAX-native envs (pure functions, vmapped over the
seeds) or EnvPool's pools (custom calls, one pool per seed: rlbench.envs.envpool_xla)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

import jax
from jax.typing import ArrayLike

from rlbench.algos.common.seed_axis import SeedAxis
from rlbench.envs.envpool_xla import EnvPoolXla
from rlbench.envs.jax_native.env import JaxEnv
from rlbench.envs.jax_native.ids import is_jax_native
from rlbench.envs.jax_native.vector import EnvCarry, EnvStep, Reported, reported_episodes, reset_envs, step_envs
from rlbench.types import EnvSpec


def steps_on_device(env_id: str, vec_env: str) -> bool:
    """Whether a run on `env_id` trains with the device loop: a JAX-native env, or EnvPool's XLA interface."""
    return is_jax_native(env_id) or vec_env == "envpool-xla"


class DeviceEnvs(Protocol):
    """A batch of envs in the device loop's layout ([(n_seeds,) n_envs]) stepped inside its programs."""

    @property
    def spec(self) -> EnvSpec: ...

    @property
    def saves_envs(self) -> bool: ...  # whether a checkpoint can hold their state (a resume continues episodes)

    @property
    def has_reset_steps(self) -> bool: ...  # whether some steps are not transitions (Reported.valid False)

    def reset(self, seeds: ArrayLike) -> EnvCarry:
        """Env j of seed s started from seeds[s, j] (uint32); a host call."""
        ...

    def step(self, envs: EnvCarry, actions: jax.Array) -> tuple[EnvCarry, EnvStep, Reported]:
        """(envs, step, what it reports) of every seed's envs, actions [(n_seeds,) n_envs, action_dim] in [-1, 1]
        (a Discrete env's index column); Reported.valid [(n_seeds,) n_envs] says which steps are transitions
        (traced)."""
        ...


@dataclass(frozen=True, eq=False)
class JaxNativeEnvs:
    """JAX-native envs (rlbench.envs.jax_native.vector), vmapped over the seeds; every step is a transition."""

    env: JaxEnv
    axis: SeedAxis
    saves_envs = True
    has_reset_steps = False
    _reset: Callable[[ArrayLike], EnvCarry] = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_reset", jax.jit(self.axis.map(lambda seeds: reset_envs(self.env, seeds))))

    @property
    def spec(self) -> EnvSpec:
        return self.env.spec

    def reset(self, seeds: ArrayLike) -> EnvCarry:
        return self._reset(seeds)

    def step(self, envs: EnvCarry, actions: jax.Array) -> tuple[EnvCarry, EnvStep, Reported]:
        # Not mapped over the seed axis: step_envs takes it, and asks once for all seeds whether to compute starts.
        envs, stepped = step_envs(self.env, envs, actions)
        return envs, stepped, reported_episodes(stepped)


def device_envs(env: JaxEnv | EnvPoolXla, axis: SeedAxis) -> DeviceEnvs:
    return env if isinstance(env, EnvPoolXla) else JaxNativeEnvs(env, axis)
