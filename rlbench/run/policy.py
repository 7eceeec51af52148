"""A trained policy rebuilt from a checkpoint alone: its manifest says the algorithm, hyperparameters
and spaces, so no hyperparameter file is needed to act with it. A model trained with `normalize` acts
on observations scaled by the statistics saved in the same checkpoint, frozen."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import jax
import numpy as np
from jax.typing import ArrayLike

from rlbench.buffers.normalization import Normalization
from rlbench.config.entry import normalize_entry, parse_normalize, split_entry
from rlbench.config.registry import get_algo
from rlbench.envs.obs_normalizer import MissingStatsError, VecNormalizeStats
from rlbench.errors import ConfigError
from rlbench.loop import compiled
from rlbench.loop.host_fetch import fetch_polling
from rlbench.store.checkpoint import Checkpoint, CheckpointError
from rlbench.store.learner_state import STATE, state_array_bytes, state_from_bytes
from rlbench.types import EnvSpec, PyTree


@dataclass
class Policy:
    """Acts in [-1, 1] (the envs rescale); deterministic = the algorithm's evaluation action (the SAC family's
    squashed mean, TD3's actor), else its stochastic one (a sample; TD3's actor again)."""

    state: PyTree  # the learner's
    spec: EnvSpec
    _act: Callable[[PyTree, ArrayLike, jax.Array, Normalization | None], tuple[jax.Array, jax.Array]]
    _act_deterministic: Callable[[PyTree, ArrayLike, Normalization | None], jax.Array]
    key: jax.Array
    stats: VecNormalizeStats | None = None  # `normalize`: the checkpoint's statistics (one seed), frozen

    def __call__(self, obs: np.ndarray, deterministic: bool = True) -> np.ndarray:
        obs = np.asarray(obs, self.spec.obs_dtype).reshape(-1, self.spec.obs_dim)
        normalization = self.normalization
        if deterministic:
            return fetch_polling(self._act_deterministic(self.state, obs, normalization))
        action, self.key = self._act(self.state, obs, self.key, normalization)
        return fetch_polling(action)

    @property
    def normalization(self) -> Normalization | None:
        return None if self.stats is None else jax.tree.map(lambda x: x[0], self.stats.device())


def load_policy(checkpoint: Checkpoint, seed: int = 0) -> Policy:
    run = checkpoint.manifest.run
    algo = get_algo(run.algo)
    where = str(checkpoint.path)
    entry = normalize_entry(dict(run.hyperparams), where)
    entry.pop("env_wrapper", None)  # acting builds no env: the wrappers are enjoy.py's, checked there
    _, _, learner_keys = split_entry(entry, where, trusted_wrapper_modules=())
    cfg = algo.build_config(learner_keys, run.n_envs, where)
    normalize = parse_normalize(entry.get("normalize"), None, where)
    spec = run.spaces.spec  # its sizes bounded by their bounds, listed in the manifest (read_manifest)
    learner = algo.make_learner(cfg, spec)  # for the state's structure: the checkpoint fills it
    programs = compiled.policy_programs(learner)
    # The state is built before it is filled: the saved one must hold at least its arrays, so that a forged
    # manifest (net_arch, n_envs of gSDE's matrices) cannot make that allocation larger than the file.
    needed = state_array_bytes(learner.init_fn)
    if len(checkpoint.state_bytes) < needed:
        raise CheckpointError(
            checkpoint.path,
            f"{STATE} holds {len(checkpoint.state_bytes)} bytes, fewer than the {needed} bytes of arrays of "
            "the learner its manifest describes",
        )
    try:
        state = state_from_bytes(programs.init(jax.random.key(0)), checkpoint.state_bytes)
    except ValueError as error:
        raise ConfigError(f"{where}: {error}") from None
    stats = None
    if normalize is not None:
        try:
            stats = VecNormalizeStats.from_arrays(normalize, [checkpoint.group("normalize")], spec.obs_dim, None)
        except MissingStatsError as error:  # the model was trained on scaled inputs: it cannot act without them
            raise CheckpointError(checkpoint.path, str(error)) from None
        except ValueError as error:
            raise ConfigError(f"{where}: {error}") from None
    return Policy(
        state=state,
        spec=spec,
        _act=programs.sample,
        _act_deterministic=programs.act_deterministic,
        key=jax.random.key(seed),
        stats=stats,
    )
