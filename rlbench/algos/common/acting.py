"""How a learner acts: the part of an algorithm the training loop and enjoy.py call to choose actions.

Every learner state has a field `exploration`: the algorithm's exploration state (gSDE's matrices for
the SAC family with use_sde, the Ornstein-Uhlenbeck noise of every env for TD3 and DDPG, None when there is
nothing to keep). It is a pytree of the learner state, so it gains the seed axis under --n-seeds and is
saved in the checkpoint with the rest: a resumed run continues the same noise.

`explore(state, obs [n_envs, obs_dim], key, episode_start [n_envs] bool, progress_remaining) -> (action,
    exploration, key)` the action for collecting experience, in [-1, 1] (a Discrete env's index); `episode_start`
    marks the envs whose episode begins with this observation (the noise of those envs restarts);
    `progress_remaining` (float32 scalar) is SB3's, 1 - env steps taken / the run's env steps (DQN's epsilon
    schedule). The loop puts the returned exploration state back into the learner state
    (`state.replace(exploration=...)`).
`sample(state, obs, key) -> (action, key)`: a stochastic action without exploration state (enjoy.py
    --stochastic).
`evaluate(state, obs) -> action`: the deterministic action (evaluation, enjoy.py).
`reads_episode_starts`: whether `explore` reads `episode_start` (otherwise the loop passes all False and
    saves itself the transfer: the SAC family's noise does not restart with an episode).
`random_warmup`: whether the loop takes uniform random actions in [-1, 1] for the steps before learning_starts
    (False: `explore` acts from the first step, gSDE's use_sde_at_warmup, or warms up itself, DQN).
`resample_due(vector_steps_in_rollout) -> bool` and `resample(state) -> state`: an exploration state that is
    redrawn on a schedule counted in vector steps into a rollout (gSDE); 0 is a rollout's start, which a
    training iteration begins.
`policy_part(state) -> state`: the learner state with only what the three above read (the policy's
    parameters and the exploration state; critics, optimizer states, keys and counters None). The host loop
    calls acting once per env step, and every array of its arguments costs that call time (about 0.5 us
    each on a CPU: benchmarks/README.md), so it passes this part, not the whole state.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import jax

from rlbench.types import PyTree

# The learner state (or its policy part) and the exploration state are each algorithm's own pytrees.
ExploreFn = Callable[[PyTree, jax.Array, jax.Array, jax.Array, jax.Array], tuple[jax.Array, PyTree, jax.Array]]


def never(vector_steps_in_rollout: int) -> bool:
    return False


def unchanged(state: PyTree) -> PyTree:
    return state


@dataclass(frozen=True)
class Acting:
    explore: ExploreFn
    sample: Callable[[PyTree, jax.Array, jax.Array], tuple[jax.Array, jax.Array]]
    evaluate: Callable[[PyTree, jax.Array], jax.Array]
    reads_episode_starts: bool = False
    random_warmup: bool = True
    resample_due: Callable[[int], bool] = never
    resample: Callable[[PyTree], PyTree] = unchanged
    policy_part: Callable[[PyTree], PyTree] = unchanged
