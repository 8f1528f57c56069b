"""Input checks and output shaping shared by the compute-time functions."""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike, NDArray

from moesim.errors import ConfigError

FloatArray = NDArray[np.float64]
#: A time (or FLOP count): a float for scalar inputs, an array for array inputs.
TimeS = float | FloatArray


def check_slowdown(slowdown: float) -> float:
    """``slowdown`` as a float; it must be a finite number >= 1 (1 = a healthy GPU)."""
    ok = isinstance(slowdown, int | float | np.floating | np.integer)
    if not ok or isinstance(slowdown, bool) or not math.isfinite(slowdown) or slowdown < 1:
        raise ConfigError("slowdown", f"must be a number >= 1, got {slowdown!r}")
    return float(slowdown)


def dim(field: str, value: ArrayLike) -> FloatArray:
    """``value`` as a float array; every entry must be finite and >= 0."""
    try:
        arr = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError):
        raise ConfigError(field, f"must be a number or array of numbers, got {value!r}") from None
    # min / max: NaN propagates into both, so this is "all finite and >= 0" in two C calls
    # (np.all / np.any go through Python wrappers: ~5x the time for the small arrays here)
    if arr.size and not (arr.min() >= 0 and math.isfinite(arr.max())):
        raise ConfigError(field, f"must be finite and >= 0, got {value!r}")
    return arr


def shaped(result: FloatArray) -> TimeS:
    """A 0-d result as a Python float, anything else unchanged."""
    return float(result) if result.ndim == 0 else result
