"""The learner state as bytes: every array leaf of a learner's train state (parameters, optimizer states,
target parameters, BatchRenorm statistics, log alpha, PRNG keys, gradient steps) as flax msgpack, the
state.msgpack member of a checkpoint, and the checks a state read back passes before it is restored: that
it parses, no deeper than any learner state, and that it fits the state the configuration builds (structure,
and each leaf's shape and dtype), without computing anything. The device loop's env state is stored the same
way (host/device_envs) and passes the same checks.
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp
import msgpack
import numpy as np
from flax import serialization

from rlbench.files import UntrustedFileError, check_tree
from rlbench.store.schema import ManifestError
from rlbench.types import PyTree

STATE = "state.msgpack"  # its member name
LEARNER_STATE = "the saved learner state"  # how messages name it


def _is_key(leaf: object) -> bool:
    dtype = getattr(leaf, "dtype", None)
    return dtype is not None and jnp.issubdtype(dtype, jax.dtypes.prng_key)


def _keys_as_data(tree: PyTree) -> PyTree:
    """`tree` with every typed PRNG key (the state's, gSDE's) as its raw uint32 key data."""
    return jax.tree.map(lambda leaf: jax.random.key_data(leaf) if _is_key(leaf) else leaf, tree)


def state_to_bytes(state: PyTree) -> bytes:
    """Every array leaf of the learner state, PRNG keys included (as their raw uint32 key data)."""
    return serialization.msgpack_serialize(serialization.to_state_dict(jax.device_get(_keys_as_data(state))))


def state_from_bytes(template: PyTree, data: bytes, what: str = LEARNER_STATE) -> PyTree:
    """Restore into a state of the same structure, built by the learner's init_fn from the same config.
    Raises ValueError when the saved state does not fit the template (see `check_state_fits`); `what` names
    the saved state in its message."""
    restored = restore_fitting(_keys_as_data(template), data, what)
    return jax.tree.map(
        lambda saved, expected: jax.random.wrap_key_data(saved) if _is_key(expected) else saved, restored, template
    )


# A learner's init_fn: a PRNG key -> its initial state.
InitFn = Callable[[jax.Array], PyTree]


def check_state_fits(init_fn: InitFn, data: bytes) -> None:
    """Check, without computing anything, that a saved learner state fits the state `init_fn` builds:
    same structure, and the same shape and dtype at every leaf (flax alone would accept other shapes)."""
    restore_fitting(_state_shapes(init_fn), data, LEARNER_STATE)


def state_array_bytes(init_fn: InitFn) -> int:
    """Bytes of the arrays of `init_fn`'s learner state (the PRNG key as its raw data), from their shapes."""
    return sum(leaf.size * leaf.dtype.itemsize for leaf in jax.tree_util.tree_leaves(_state_shapes(init_fn)))


def state_size_bound(init_fn: InitFn) -> int:
    """The most bytes the msgpack of `init_fn`'s learner state can take: its arrays, plus a generous
    allowance per leaf for its keys and headers (a few dozen bytes in practice)."""
    n_leaves = len(jax.tree_util.tree_leaves(_state_shapes(init_fn)))
    return state_array_bytes(init_fn) + 1024 * (n_leaves + 1)


def _state_shapes(init_fn: InitFn) -> PyTree:
    """The learner state's shapes and dtypes, the PRNG key as raw key data, without computing anything."""
    return tree_shapes(init_fn, jax.random.key(0))


def tree_shapes(build: Callable[..., PyTree], *args: PyTree) -> PyTree:
    """The shapes and dtypes of the state `build(*args)` returns, PRNG keys as raw key data (as saved), without
    computing anything: what `restore_fitting` checks a saved state against."""
    return jax.eval_shape(lambda *values: _keys_as_data(build(*values)), *args)


def check_state_readable(data: bytes, member: str = STATE, what: str = "learner state") -> None:
    """ManifestError unless `data` (the bytes of `member`, a saved `what`) parses as msgpack no deeper than any
    saved state: flax's restore recurses into every nested map (a RecursionError from about 1,000 levels), its
    errors print them, and msgpack itself stops at 1,024. Each array's bytes are dropped as soon as they are
    read (the ext_hook), so this costs no copy of the state; values cannot outnumber bytes."""
    try:
        tree = msgpack.unpackb(data, raw=False, strict_map_key=False, ext_hook=lambda code, payload: None)
        check_tree(tree, max_values=len(data) + 1)
    except (ValueError, TypeError, RecursionError, msgpack.exceptions.UnpackException) as error:
        if isinstance(error, UntrustedFileError):
            reason = str(error)
        elif isinstance(error, RecursionError | msgpack.exceptions.StackError):
            reason = "nested too deeply to parse"
        else:
            reason = error_reason(error)
        raise ManifestError(f"{member} is not a readable {what} ({reason})") from None


def error_reason(error: BaseException) -> str:
    """`Type: message`, or the type alone for an error without one (msgpack's StackError has none)."""
    return f"{type(error).__name__}: {error}" if str(error) else type(error).__name__


def restore_fitting(template: PyTree, data: bytes, what: str) -> PyTree:
    """The saved state `data` restored into `template`'s structure (numpy leaves); ValueError, naming the saved
    state as `what`, unless it has the template's structure and each leaf its shape and dtype."""
    try:
        restored = serialization.from_state_dict(template, serialization.msgpack_restore(data))
    except (ValueError, KeyError, TypeError, AttributeError) as error:
        raise ValueError(f"{what} does not match this configuration ({error_reason(error)})") from None
    saved_leaves = jax.tree_util.tree_leaves_with_path(restored)
    expected_leaves = jax.tree_util.tree_leaves(template)
    if len(saved_leaves) != len(expected_leaves):
        raise ValueError(
            f"{what} has {len(saved_leaves)} arrays, this configuration {len(expected_leaves)}"
            + (" (a different entropy coefficient mode or architecture?)" if what == LEARNER_STATE else "")
        )
    for (path, saved), expected in zip(saved_leaves, expected_leaves, strict=True):
        shape, dtype = np.shape(saved), np.asarray(saved).dtype
        if shape != tuple(expected.shape) or dtype != expected.dtype:
            raise ValueError(
                f"{what} does not match this configuration at {jax.tree_util.keystr(path)}: "
                f"saved {dtype}{list(shape)}, configured {expected.dtype}{list(expected.shape)}"
            )
    return restored
