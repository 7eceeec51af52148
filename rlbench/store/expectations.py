"""What each reader requires of a checkpoint's members, derived from its manifest alone (checked already,
rlbench.store.manifest.read_manifest): which members must be there, with which shapes and dtypes, so that
`read_checkpoint` can check every declared size before anything is decompressed.

- `policy_expectations`: enjoy.py, rebuilding a policy (no host state, no buffer needed);
- `resume_expectations`: train.py -i, the sweep's continued cells: the layout HostState.to_checkpoint and
  buffer_to_arrays write, every member accounted for.
"""

from __future__ import annotations

import jax
import numpy as np

from rlbench.buffers.uniform import pixel_width, row_width
from rlbench.envs.obs_normalizer import expected_shapes as normalization_shapes
from rlbench.store.manifest import Manifest
from rlbench.store.schema import Expected, Shape, UpTo


def policy_expectations(manifest: Manifest) -> Expected:
    """n_envs bounded by the observations every checkpoint holds, one row per env (the learner state is
    checked against the configuration when it is restored)."""
    return Expected(
        shapes={"host/obs": (manifest.run.n_envs, manifest.run.spaces.observation.size)}, learner_state=True
    )


def resume_expectations(manifest: Manifest) -> Expected:
    """Every member a resume reads, its shape derived from the manifest's counts and spaces; no other may be
    there."""
    spec = manifest.run.spaces.spec
    normalize_shapes = normalization_shapes(spec.obs_dim, manifest.run.n_envs)
    optional: dict[str, Shape | None] = {
        "host/next_action": (manifest.run.n_envs, spec.action_dim),
        # An on-policy learner's staged rollout keeps its episodes' time limits (PendingTransitions).
        "host/pending_truncated": (manifest.host.pending_count,),
        # As many as evaluations were run, of as many episodes as asked: stored, so the file bounds them.
        **dict.fromkeys(["host/eval_timesteps", "host/eval_results", "host/eval_ep_lengths"]),
        # The device loop's envs, as msgpack bytes (uncompressed: the file bounds them), checked against the
        # envs the configuration builds before they are restored (rlbench.loop.device.start).
        "host/device_envs": None,
        # A run with `normalize`: whether they must be there is the configuration's to say (saving.restore).
        **{f"normalize/{name}": shape for name, shape in normalize_shapes.items()},
    }
    # An image run's observations are uint8 wherever they are kept (rlbench.envs.images).
    observations = ("host/obs", "host/pending_obs", "host/pending_next_obs", "replay_buffer/pixels")
    dtypes = {
        **(dict.fromkeys(observations, "uint8") if spec.image_shape else {}),
        "replay_buffer/rows": "float32",
        "host/device_envs": "uint8",
        **dict.fromkeys((f"normalize/{name}" for name in normalize_shapes), "float64"),
    }
    # The actions each env took since its episode began: at most one per vector step.
    episode_actions = (UpTo(manifest.host.vector_steps), spec.action_dim)
    return Expected(
        shapes=_host_shapes(manifest) | _buffer_shapes(manifest),
        optional=optional,
        dtypes=dtypes,
        closed=True,
        numbered={"host/episode_actions_": (manifest.run.n_envs, episode_actions)},
        learner_state=True,
        msgpack={"host/device_envs": "env state"},
    )


def _host_shapes(manifest: Manifest) -> dict[str, Shape]:
    """The host/ members HostState.to_checkpoint writes."""
    spec = manifest.run.spaces.spec
    obs_dim, action_dim = spec.obs_dim, spec.action_dim
    n_envs, pending, episodes = manifest.run.n_envs, manifest.host.pending_count, manifest.counters.episodes
    shapes: dict[str, Shape] = {
        "host/obs": (n_envs, obs_dim),
        "host/act_key": np.shape(jax.random.key_data(jax.random.key(0))),
        "host/episode_returns": (n_envs,),
        "host/episode_lengths": (n_envs,),
        "host/finished_returns": (episodes,),
        "host/finished_lengths": (episodes,),
        "host/pending_obs": (pending, obs_dim),
        "host/pending_next_obs": (pending, obs_dim),
        "host/pending_action": (pending, action_dim),
        "host/pending_reward": (pending,),
        "host/pending_terminated": (pending,),
    }
    # Each episode a resume replays (rlbench.envs.episode_restore): its actions are one member per env, as many as the
    # manifest's own list of starts holds, so the file bounds them.
    for index, start in enumerate(manifest.host.episode_starts or ()):
        if start is not None:
            shapes[f"host/episode_actions_{index}"] = (UpTo(manifest.host.vector_steps), action_dim)
    return shapes


def _buffer_shapes(manifest: Manifest) -> dict[str, Shape]:
    """The replay_buffer/ members buffer_to_arrays writes, when the checkpoint holds them."""
    if not manifest.replay_buffer:
        return {}
    spec, capacity = manifest.run.spaces.spec, UpTo(manifest.run.hyperparams.get("buffer_size", 0))
    shapes: dict[str, Shape] = {
        "replay_buffer/rows": (capacity, row_width(spec)),
        "replay_buffer/position": (),
        "replay_buffer/capacity": (),
    }
    if pixel_width(spec):
        shapes["replay_buffer/pixels"] = (capacity, pixel_width(spec))
    return shapes
