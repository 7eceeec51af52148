"""A checkpoint's manifest as a typed record: which run wrote it (`RunDescription`, the same in each of a
seed's checkpoints), what the checkpoint holds (counters, the host loop's scalars, whether the replay
buffer is in it, a divergence), and the library versions that wrote it.

On disk it is manifest.json, one flat JSON object, to which rlbench.store.checkpoint adds the format version
and each member's checksum and size. `read_manifest` builds the record from the parsed JSON only once
rlbench.store.schema has checked every key and value (the file is untrusted); `manifest_json` gives the JSON
back, key for key as format 3 has always written it.
"""

from __future__ import annotations

import math
import platform
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields
from typing import Any, Literal

import jax
import numpy as np

from rlbench import __version__
from rlbench.envs.discrete import action_count
from rlbench.envs.images import is_image
from rlbench.store.schema import check_manifest
from rlbench.types import EnvSpec

# Why a checkpoint was written: every save_freq env steps ("checkpoint", rl_model_<steps>_steps.zip), at a new
# best evaluation, at the end of the run, when a stop was requested, or after a failure (rlbench.loop.save_points).
CheckpointKind = Literal["checkpoint", "best", "final", "interrupt", "failure"]


@dataclass(frozen=True)
class Space:
    """An observation or action space: its bounds are listed value by value, flattened."""

    shape: tuple[int, ...]
    dtype: str
    low: tuple[float, ...]
    high: tuple[float, ...]

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    @classmethod
    def from_json(cls, value: Mapping[str, Any]) -> Space:
        return cls(tuple(value["shape"]), value["dtype"], tuple(value["low"]), tuple(value["high"]))


@dataclass(frozen=True)
class Spaces:
    observation: Space
    action: Space

    @property
    def spec(self) -> EnvSpec:
        """The learner's sizes; an integer action space is a Discrete env's index (rlbench.envs.discrete)."""
        obs = self.observation
        image_shape = obs.shape if is_image(obs.shape, obs.dtype, obs.low, obs.high) else ()
        return EnvSpec(obs.size, self.action.size, action_count(self.action.dtype, self.action.high), image_shape)

    @classmethod
    def from_json(cls, value: Mapping[str, Any]) -> Spaces:
        """From the JSON form (rlbench.run.probe.describe_space's, for each space)."""
        return cls(Space.from_json(value["observation"]), Space.from_json(value["action"]))


@dataclass(frozen=True)
class Group:
    """A seed of a run of several: the group's id, this seed's index, and every seed's run folder name."""

    id: str
    index: int
    run_dirs: tuple[str, ...]


@dataclass(frozen=True)
class RunDescription:
    """The seed's run, the same in each of its checkpoints: what rebuilds its learner and checks a resume."""

    algo: str
    env_id: str
    seed: int
    n_timesteps: int
    n_envs: int
    hyperparams: Mapping[str, Any]  # resolved, in the hyperparameter files' format
    spaces: Spaces
    resumed_from: str | None = None  # the checkpoint this run continued (`-i`)
    wandb_run_id: str | None = None
    group: Group | None = None  # only in a run of several seeds


@dataclass(frozen=True)
class Counters:
    env_steps: int
    gradient_steps: int
    episodes: int  # finished


@dataclass(frozen=True)
class HostInfo:
    """The host loop's scalars (its arrays are the checkpoint's host/ members; rlbench.store.host_state)."""

    env_steps: int
    vector_steps: int
    episodes_at_last_log: int
    update_start: int
    pending_count: int  # transitions collected since the last update
    best_mean_reward: float | None  # None: no evaluation yet
    warmup_rng: Mapping[str, Any]  # numpy's PCG64 state, as `bit_generator.state` gives it
    metrics: Mapping[str, float] | None  # the last update's
    # How each env's current episode began (EpisodeRecorder); None: the envs could not be asked.
    episode_starts: tuple[Mapping[str, Any] | None, ...] | None


@dataclass(frozen=True)
class Divergence:
    detected_at_env_steps: int
    learner_state_from_env_steps: int  # the last learner state found finite, the one saved


def library_versions() -> dict[str, str]:
    import flax
    import gymnasium
    import optax

    return {
        "rlbench": __version__,
        "jax": jax.__version__,
        "flax": flax.__version__,
        "optax": optax.__version__,
        "gymnasium": gymnasium.__version__,
        "numpy": np.__version__,
        "python": platform.python_version(),
        "backend": jax.default_backend(),
    }


@dataclass(frozen=True)
class Manifest:
    """One checkpoint's manifest.json, less what the archive adds (format version, members' checksums and sizes)."""

    run: RunDescription
    kind: CheckpointKind  # why it was written
    counters: Counters
    host: HostInfo
    replay_buffer: bool  # the replay_buffer/ members are in it
    divergence: Divergence | None = None
    versions: Mapping[str, str] = field(default_factory=library_versions)


def read_manifest(value: Mapping[str, Any]) -> Manifest:
    """The record of a parsed manifest.json; ManifestError (rlbench.store.schema) naming the first key
    that is missing or does not fit, before any value is used."""
    check_manifest(value)
    host = value["host"]
    starts = host.get("episode_starts")
    return Manifest(
        run=RunDescription(
            **_picked(RunDescription, value, ("hyperparams", "spaces", "group")),
            hyperparams=dict(value["hyperparams"]),
            spaces=Spaces.from_json(value["spaces"]),
            group=None if value.get("group") is None else _group(value["group"]),
        ),
        kind=value["kind"],
        counters=Counters(**_picked(Counters, value["counters"])),
        host=HostInfo(
            **_picked(HostInfo, host, ("episode_starts",)), episode_starts=None if starts is None else tuple(starts)
        ),
        replay_buffer=value["replay_buffer"],
        divergence=None if value.get("divergence") is None else Divergence(**_picked(Divergence, value["divergence"])),
        versions=dict(value["versions"]),
    )


def _picked(record: type, value: Mapping[str, Any], skip: tuple[str, ...] = ()) -> dict[str, Any]:
    """The JSON values of `record`'s fields (absent ones: None, where the schema allows that), no others."""
    return {item.name: value.get(item.name) for item in fields(record) if item.name not in skip}


def _group(value: Mapping[str, Any]) -> Group:
    return Group(value["id"], value["index"], tuple(value["run_dirs"]))


def manifest_json(manifest: Manifest) -> dict[str, Any]:
    """The JSON object `read_manifest` reads (numpy scalars left to the writer's JSON encoder). `group`
    and `divergence` are written only when there is one, as they always were."""
    value = {
        **asdict(manifest.run),
        "kind": manifest.kind,
        "replay_buffer": manifest.replay_buffer,
        "counters": asdict(manifest.counters),
        "host": asdict(manifest.host),
        "versions": dict(manifest.versions),
    }
    if manifest.run.group is None:
        del value["group"]
    if manifest.divergence is not None:
        value["divergence"] = asdict(manifest.divergence)
    return value
