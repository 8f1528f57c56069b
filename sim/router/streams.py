"""Named random streams, so every draw is independent of call order.

Each draw takes its own generator from ``SeedSequence([seed, tag, *keys])``: the popularity of a
layer and the token sampling of a (layer, micro-batch, step) never share or consume one another's
stream, so routing layer 7 first or last gives the same arrays.
"""

from __future__ import annotations

import numpy as np

from moesim.errors import ConfigError

TAG_POPULARITY_LAYER = 1
"""Popularity fixed per layer: keys (layer, drift epoch)."""
TAG_POPULARITY_MICROBATCH = 2
"""Popularity redrawn per forward: keys (layer, micro-batch, step)."""
TAG_TOKENS = 3
"""Token-to-expert sampling: keys (layer, micro-batch, step)."""


def check_index(field: str, value: object, minimum: int = 0) -> int:
    """Return ``value`` if it is an int >= ``minimum``, else raise ConfigError naming ``field``."""
    if isinstance(value, bool) or not isinstance(value, int | np.integer):
        raise ConfigError(field, f"must be an integer >= {minimum}, got {value!r}")
    if value < minimum:
        raise ConfigError(field, f"must be an integer >= {minimum}, got {value}")
    return int(value)


def stream(seed: int, tag: int, *keys: int) -> np.random.Generator:
    """A generator owned by one (seed, tag, keys) tuple; same tuple -> same stream."""
    return np.random.default_rng(np.random.SeedSequence([seed, tag, *keys]))
