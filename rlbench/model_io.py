"""Saving learner state without pickle: flax msgpack for the arrays, a JSON manifest beside it.

The manifest records the format version, algorithm, resolved hyperparameters, spaces, library
versions and the SHA-256 of the state file. (Full checkpointing and resume build on this.)
"""

from __future__ import annotations

import hashlib
import json
import platform
from pathlib import Path
from typing import Any

import jax
from flax import serialization

from rlbench import __version__
from rlbench.files import atomic_write_bytes, atomic_write_text

FORMAT_VERSION = 1


def state_to_bytes(state: Any) -> bytes:
    """Every array leaf of the learner state (parameters, optimizer states, targets, PRNG key)."""
    # Typed PRNG keys are not plain arrays: store their raw uint32 key data.
    state = state.replace(key=jax.random.key_data(state.key))
    return serialization.msgpack_serialize(serialization.to_state_dict(jax.device_get(state)))


def state_from_bytes(template: Any, data: bytes) -> Any:
    """Restore into a state of the same structure (built by the learner's init_fn)."""
    raw = serialization.msgpack_restore(data)
    restored = serialization.from_state_dict(template.replace(key=jax.random.key_data(template.key)), raw)
    return restored.replace(key=jax.random.wrap_key_data(restored.key))


def library_versions() -> dict[str, str]:
    import flax
    import gymnasium
    import numpy
    import optax

    return {
        "rlbench": __version__,
        "jax": jax.__version__,
        "flax": flax.__version__,
        "optax": optax.__version__,
        "gymnasium": gymnasium.__version__,
        "numpy": numpy.__version__,
        "python": platform.python_version(),
        "backend": jax.default_backend(),
    }


def save_model(path: Path, state: Any, manifest: dict[str, Any]) -> None:
    """Write `<path>.msgpack`, then `<path>.json` (the manifest is committed last)."""
    data = state_to_bytes(state)
    atomic_write_bytes(path.with_suffix(".msgpack"), data)
    manifest = {
        "format_version": FORMAT_VERSION,
        **manifest,
        "versions": library_versions(),
        "state_sha256": hashlib.sha256(data).hexdigest(),
    }
    atomic_write_text(path.with_suffix(".json"), json.dumps(manifest, indent=2, sort_keys=True, default=str))
