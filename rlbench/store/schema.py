"""What a checkpoint must hold before any of it is trusted: the manifest's keys, types and values
(`check_manifest`), and the types that say which members a reader requires, and of which shapes
(`Expected`; rlbench.store.expectations derives them from the manifest).

A checkpoint is input like any other (a file from another machine, or an edited one): `read_checkpoint`
checks each member's declared size against these before decompressing it, so a small forged archive
cannot make the reader allocate gigabytes.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from rlbench.envs.discrete import INTEGER_DTYPES, MAX_ACTIONS

INT64_MAX = 2**63 - 1  # every integer setting fits 64 bits (rlbench.config.values.INT_MAX)
MAX_SEED = 2**32 - 1  # as SB3 and RL Zoo: numpy's legacy seeding and JAX keys take any seed up to here


class ManifestError(ValueError):
    """A manifest or member that does not match the checkpoint format (the file is corrupt: exit 1)."""


# -- a small typed schema: dicts nest, and these mark lists, maps and nullable values ------------------


@dataclass(frozen=True)
class ListOf:
    item: Schema


@dataclass(frozen=True)
class MapOf:
    """A JSON object with any keys, each value of type `item`."""

    item: Schema


@dataclass(frozen=True)
class OrNone:
    """The value may be null, or the key absent (keys that older checkpoints lack)."""

    kind: Schema


@dataclass(frozen=True)
class AtLeast:
    """An integer no smaller than `minimum` (sizes a learner cannot be built with at 0) and no larger than
    `maximum` (64 bits, as every integer setting; a generator's 128-bit state words say so)."""

    minimum: int
    maximum: int = INT64_MAX


# A value's schema: a JSON type (int: a non-negative integer; float, str, bool, dict, list), one of the marks above,
# or a dict of the keys an object holds, each with its own schema.
Schema = type | ListOf | MapOf | OrNone | AtLeast | dict[str, "Schema"]

_EXPECTED = {
    int: "a non-negative integer",
    float: "a number",
    str: "a string",
    bool: "true or false",
    dict: "a mapping",
    list: "a list",
}


def check_schema(value: Any, schema: Schema, key: str = "") -> None:
    """Raise ManifestError naming the first key that is missing or not of its schema's type. `int` means a
    non-negative integer (counts, sizes, seeds); keys the schema does not name are not checked."""
    if isinstance(schema, OrNone):
        if value is not None:
            check_schema(value, schema.kind, key)
    elif isinstance(schema, dict):
        _check_type(value, dict, key)
        for name, item in schema.items():
            if name not in value and not isinstance(item, OrNone):
                raise ManifestError(f"the manifest has no {_join(key, name)}")
            check_schema(value.get(name), item, _join(key, name))
    elif isinstance(schema, AtLeast):
        if type(value) is not int or value < schema.minimum:
            wanted = _EXPECTED[int] if schema.minimum == 0 else f"an integer >= {schema.minimum}"
            raise ManifestError(f"manifest {key}: expected {wanted}, got {_shown(value)}")
        _check_not_too_large(value, schema.maximum, key)
    elif isinstance(schema, ListOf | MapOf):
        _check_type(value, list if isinstance(schema, ListOf) else dict, key)
        items = enumerate(value) if isinstance(schema, ListOf) else value.items()
        for index, item in items:
            check_schema(item, schema.item, f"{key}[{index!r}]")
    else:
        _check_type(value, schema, key)


def _check_not_too_large(value: int, maximum: int, key: str) -> None:
    if value > maximum:
        raise ManifestError(f"manifest {key}: {_shown(value)} is too large (at most 2**{maximum.bit_length()}-1)")


def _check_type(value: Any, kind: type, key: str) -> None:
    if kind is int:
        valid = type(value) is int and value >= 0
        if valid:
            _check_not_too_large(value, INT64_MAX, key)
    elif kind is float:
        valid = type(value) in (int, float)
    else:
        valid = isinstance(value, kind)
    if not valid:
        raise ManifestError(f"manifest {key}: expected {_EXPECTED[kind]}, got {_shown(value)}")


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _join(key: str, name: str) -> str:
    return f"{key}.{name}" if key else name


# What every reader needs: the members' checksums and (written since sizes were added) their sizes.
ARCHIVE_SCHEMA: Schema = {"format_version": int, "members": MapOf(str), "sizes": OrNone(MapOf(int))}

_SPACE: Schema = {"shape": ListOf(AtLeast(1)), "dtype": str, "low": ListOf(float), "high": ListOf(float)}

# Every key rlbench.store.manifest.Manifest holds, as format 3 has always written it (OrNone: null, or absent
# where older checkpoints lack the key). Resuming reads all of it; enjoy.py and the sweep's readers a part.
MANIFEST_SCHEMA: Schema = {
    "algo": str,
    "env_id": str,
    "seed": int,
    "n_timesteps": int,
    "n_envs": AtLeast(1),
    "replay_buffer": bool,
    "kind": str,
    "hyperparams": {"buffer_size": OrNone(AtLeast(1))},  # absent for a learner without a replay buffer
    "spaces": {"observation": _SPACE, "action": _SPACE},
    "counters": {"env_steps": int, "gradient_steps": int, "episodes": int},
    "host": {
        "env_steps": int,
        "vector_steps": int,
        "episodes_at_last_log": int,
        "update_start": int,
        "pending_count": int,
        "best_mean_reward": OrNone(float),
        "warmup_rng": {
            "bit_generator": str,
            "state": {"state": AtLeast(0, 2**128 - 1), "inc": AtLeast(0, 2**128 - 1)},
            "has_uint32": int,
            "uinteger": int,
        },
        "metrics": OrNone(MapOf(float)),
        "episode_starts": OrNone(ListOf(OrNone(dict))),
    },
    "resumed_from": OrNone(str),
    "wandb_run_id": OrNone(str),
    # A seed of a run of several: the group's id, this seed's index, and every seed's run folder name.
    "group": OrNone({"id": str, "index": int, "run_dirs": ListOf(str)}),
    # After a divergence: the env step it was found at, and that of the (last finite) learner state saved.
    "divergence": OrNone({"detected_at_env_steps": int, "learner_state_from_env_steps": int}),
    "versions": MapOf(str),  # the libraries that wrote it
}


# -- expected member shapes ---------------------------------------------------------------------------


@dataclass(frozen=True)
class UpTo:
    """An axis of any length up to `limit` (the replay buffer's filled rows)."""

    limit: int

    def __repr__(self) -> str:
        return f"<={self.limit}"


Shape = tuple[int | UpTo, ...]


@dataclass(frozen=True)
class Expected:
    """What a reader requires of the members, checked before any is decompressed: `shapes` members must be
    present, `optional` ones may be (a None shape: any, for members stored uncompressed, whose size
    the file's bounds); with `closed`, no other array member may be."""

    shapes: Mapping[str, Shape] = field(default_factory=dict)  # "host/obs" -> (n_envs, obs_dim)
    optional: Mapping[str, Shape | None] = field(default_factory=dict)
    dtypes: Mapping[str, str] = field(default_factory=dict)  # where only one dtype is written
    closed: bool = False
    state_bytes: int | None = None  # the largest learner state the configuration can produce
    learner_state: bool = False  # state.msgpack must parse as a (flax msgpack) learner state, checked when read
    # uint8 array members holding a state as flax msgpack, and what it is ("host/device_envs" -> "env state"):
    # each must parse as state.msgpack must, checked when read.
    msgpack: Mapping[str, str] = field(default_factory=dict)
    # Optional members numbered 0..count-1 after a prefix ("host/episode_actions_" -> (n_envs, shape)): matched
    # by name, so a forged count sizes nothing here.
    numbered: Mapping[str, tuple[int, Shape]] = field(default_factory=dict)

    def allows(self, name: str) -> bool:
        return not self.closed or name in self.shapes or name in self.optional or self._numbered(name) is not None

    def shape_of(self, name: str) -> Shape | None:
        return self.shapes.get(name, self.optional.get(name, self._numbered(name)))

    def _numbered(self, name: str) -> Shape | None:
        for prefix, (count, shape) in self.numbered.items():
            index = name.removeprefix(prefix)
            # At most 19 digits (64 bits): int() refuses a 5,000-digit member name with a ValueError of its own.
            if index != name and len(index) < 20 and index.isascii() and index.isdigit() and str(int(index)) == index:
                return shape if int(index) < count else None
        return None

    def check_file_holds(self, file_size: int) -> None:
        """ManifestError when a required member's shape (the manifest's counts and spaces, in Python integers)
        needs more bytes than the whole file: each value takes at least one byte of a stored member."""
        for name, shape in self.shapes.items():
            values = math.prod(0 if isinstance(size, UpTo) else size for size in shape)
            if values > file_size:
                raise ManifestError(
                    f"the manifest makes {name}.npy {describe_shape(shape)}: {values} values, more than the "
                    f"whole file ({file_size} bytes) holds (a forged n_envs, count or space?)"
                )


def shape_fits(shape: tuple[int, ...], expected: Shape) -> bool:
    return len(shape) == len(expected) and all(
        size <= want.limit if isinstance(want, UpTo) else size == want
        for size, want in zip(shape, expected, strict=True)
    )


def describe_shape(shape: Shape) -> str:
    return f"[{', '.join(map(repr, shape))}]"


def space_sizes(manifest: Mapping[str, Any]) -> tuple[int, int]:
    """(obs_dim, action_dim) from the manifest's spaces, bounded by the manifest itself: a space lists its
    bounds value by value, so a shape must describe exactly as many values as `low` and `high` hold (Python
    integers: numpy's product of [2**40, 2**40] overflows to 0). Raises ManifestError."""
    sizes = []
    for name in ("observation", "action"):
        space = manifest["spaces"][name]
        size = math.prod(space["shape"])
        if not len(space["low"]) == len(space["high"]) == size:
            raise ManifestError(
                f"manifest spaces.{name}: shape {_shown(space['shape'])} describes {size} values, but its low "
                f"and high list {len(space['low'])} and {len(space['high'])}"
            )
        sizes.append(size)
    return sizes[0], sizes[1]


BIT_GENERATORS = ("PCG64", "PCG64DXSM", "MT19937", "Philox", "SFC64")


def check_manifest(manifest: Mapping[str, Any]) -> None:
    """Check every key and value of a manifest read back (MANIFEST_SCHEMA), then what its types cannot say:
    the warmup generator's state, the group, how each env's episode began, the seeds' range, the spaces'
    sizes and a Discrete action space's count. Raises ManifestError naming the first key that does not fit."""
    check_schema(manifest, MANIFEST_SCHEMA)
    try:  # numpy knows which values a PCG64 state may hold
        np.random.default_rng().bit_generator.state = manifest["host"]["warmup_rng"]
    except (ValueError, OverflowError) as error:
        raise ManifestError(f"manifest host.warmup_rng: not a PCG64 generator state ({error})") from None
    group = manifest.get("group")
    if group is not None:
        _check_group(group)
    _check_episode_starts(manifest["host"]["episode_starts"], manifest["n_envs"])
    last_seed = manifest["seed"] + (len(group["run_dirs"]) - 1 if group else 0)
    if last_seed > MAX_SEED:
        raise ManifestError(f"manifest seed: seeds are in [0, 2**32-1], the checkpoint's run goes up to {last_seed}")
    space_sizes(manifest)
    _check_discrete_action(manifest["spaces"]["action"])


def _check_discrete_action(space: Mapping[str, Any]) -> None:
    """An integer action space is a Discrete env's index space (rlbench.envs.discrete): shape [1], low [0], and
    high n-1 for its n actions, which sizes the learner's output (a forged n would size a huge one)."""
    if space["dtype"] not in INTEGER_DTYPES:
        return
    discrete = f"an integer ({space['dtype']}) action space is a Discrete env's action index"
    if space["shape"] != [1]:
        raise ManifestError(f"manifest spaces.action.shape: {discrete}, of shape [1], got {_shown(space['shape'])}")
    if space["low"] != [0]:
        raise ManifestError(f"manifest spaces.action.low: {discrete}, from [0], got {_shown(space['low'])}")
    (high,) = space["high"]
    # Compared before float(): a 400-digit JSON integer overflows it. NaN and inf fail the comparison.
    if not (0 <= high < MAX_ACTIONS and float(high).is_integer()):
        raise ManifestError(
            f"manifest spaces.action.high: {discrete}, up to an integer n-1 in [0, 2**{MAX_ACTIONS.bit_length() - 1}) "
            f"for n actions, got {_shown(high)}"
        )


def _check_group(group: Mapping[str, Any]) -> None:
    if group["index"] >= len(group["run_dirs"]):
        raise ManifestError(
            f"manifest group.index: {group['index']} is not below the group's {len(group['run_dirs'])} seeds"
        )
    for name in group["run_dirs"]:  # read back to find the other seeds' checkpoints: plain names only
        if not name or name in (".", "..") or "/" in name or "\\" in name or "\0" in name:
            raise ManifestError(f"manifest group.run_dirs: {name!r} is not a run folder name")


def _check_episode_starts(starts: list[Any] | None, n_envs: int) -> None:
    if starts is None:
        return
    if len(starts) != n_envs:
        raise ManifestError(
            f"manifest host.episode_starts: {len(starts)} entries, expected one per env (n_envs={n_envs})"
        )
    for index, start in enumerate(starts):
        _check_episode_start(index, start)


def _check_episode_start(index: int, start: Any) -> None:
    """How an env's episode began, as EpisodeRecorder records it: null, {"seed": n} or {"rng": <the state of one
    of numpy's bit generators>} (gymnasium's is PCG64; numpy knows which values a state may hold; the name is
    looked up in numpy on resume, so only its generators' names are accepted), either with "resets": the strictly
    increasing positions in the episode's actions of the resets that carried its game on. Raises ManifestError."""
    if start is None:
        return
    if isinstance(start, dict) and _resets_valid(start.get("resets", [])):
        begun = {key: value for key, value in start.items() if key != "resets"}
        if begun.keys() == {"seed"} and type(begun["seed"]) is int and begun["seed"] >= 0:
            return
        rng = begun.get("rng") if begun.keys() == {"rng"} else None
        if isinstance(rng, dict) and rng.get("bit_generator") in BIT_GENERATORS:
            try:
                getattr(np.random, rng["bit_generator"])().state = rng
                return
            except (ValueError, OverflowError, TypeError, KeyError):
                pass
    raise ManifestError(
        f"manifest host.episode_starts[{index}]: expected null, {{seed: <non-negative integer>}} or "
        f"{{rng: <the state of numpy's {', '.join(BIT_GENERATORS)}>}}, either with resets: <strictly increasing "
        f"non-negative integers>, got {_shown(start)}"
    )


def _resets_valid(resets: Any) -> bool:
    return (
        isinstance(resets, list)
        and all(type(position) is int and position >= 0 for position in resets)
        and all(a < b for a, b in itertools.pairwise(resets))
    )
