"""What an env is refused for before it trains, whatever package it comes from: env kwargs that are not finite
numbers, and action bounds that cannot be rescaled from [-1, 1].

- A NaN kwarg is never meaningful, and an infinite scalar one (`g: 1e999`) builds an env that computes with
  inf, or whose bounds are inf: it trains to NaN, or some packages (gymnasium's Box) raise deep inside. Inside
  a list or tuple inf stays valid: it is how a range leaves one end open (Hopper's healthy_z_range
  defaults to (0.7, inf)).
- Actions are rescaled in float32 (the device loop; the learner's actions are float32), `low + (a + 1) / 2 *
  (high - low)`: every bound and the span must be finite there. Observation bounds are never rescaled to,
  so they may be infinite (MuJoCo's are).
"""

from __future__ import annotations

import math
import reprlib
from collections.abc import Mapping
from typing import Any, TypeGuard

import numpy as np
import numpy.typing as npt

FLOAT32_MAX = float(np.finfo(np.float32).max)


def non_finite_kwarg(env_kwargs: Mapping[str, Any]) -> str | None:
    """`key=value` of the first kwarg that is NaN anywhere, or an infinite number outside a list or tuple
    (nested dicts' keys dotted), or None."""
    for key, value in env_kwargs.items():
        if isinstance(value, Mapping):
            found = non_finite_kwarg(value)
            if found is not None:
                return f"{key}.{found}"
        elif (_is_float(value) and not math.isfinite(value)) or _holds_nan(value):
            return f"{key}={reprlib.repr(value)}"
    return None


def _is_float(value: object) -> TypeGuard[float | np.floating]:
    return isinstance(value, float | np.floating)


def _holds_nan(value: object) -> bool:
    if isinstance(value, list | tuple):
        return any(_holds_nan(item) for item in value)
    if isinstance(value, Mapping):
        return any(_holds_nan(item) for item in value.values())
    return _is_float(value) and math.isnan(value)


def unrescalable_bounds(low: npt.ArrayLike, high: npt.ArrayLike) -> str | None:
    """Why actions cannot be rescaled from [-1, 1] to [low, high] in float32 (one clause), or None."""
    low64, high64 = np.asarray(low, np.float64), np.asarray(high, np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        span = high64.astype(np.float32) - low64.astype(np.float32)
    finite = np.isfinite(low64) & np.isfinite(high64) & (np.abs(low64) <= FLOAT32_MAX) & (np.abs(high64) <= FLOAT32_MAX)
    if finite.all() and np.isfinite(span).all():
        return None
    return (
        f"action bounds low={_shown(low64)} high={_shown(high64)} cannot be rescaled from [-1, 1]: each bound "
        f"and high - low must be finite in float32 (at most {FLOAT32_MAX:.4g})"
    )


def _shown(bounds: np.ndarray) -> str:
    """At most a few bounds, to float32's precision: a float32 3e38 reads 3e+38, not 3.0000000054977558e+38."""
    return reprlib.repr([float(f"{value:.7g}") for value in bounds.ravel()])
