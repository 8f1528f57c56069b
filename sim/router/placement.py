"""Expert placement: which EP rank hosts each expert, as a registry of plain functions.

``contiguous`` is Megatron's layout (rank r holds experts r*E/EP .. (r+1)*E/EP - 1);
``round_robin`` deals experts out like cards (expert e on rank e % EP), which spreads
neighbouring experts - and so a group-limited token's experts - over more ranks.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from moesim.errors import ConfigError
from moesim.registry import Registry

PlacementFn = Callable[[int, int], np.ndarray]
"""(n_experts, n_ranks) -> int64 [n_experts]: the EP rank hosting each expert."""

_PLACEMENTS = Registry[PlacementFn]("router.placement", "placement")


def register_placement(name: str, fn: PlacementFn) -> PlacementFn:
    """Add a placement under ``name``; a duplicate name is an error."""
    return _PLACEMENTS.add(name, fn)


def placement_names() -> tuple[str, ...]:
    """Registered placement names, in registration order."""
    return _PLACEMENTS.names()


def _contiguous(n_experts: int, n_ranks: int) -> np.ndarray:
    return np.arange(n_experts, dtype=np.int64) // (n_experts // n_ranks)


def _round_robin(n_experts: int, n_ranks: int) -> np.ndarray:
    return np.arange(n_experts, dtype=np.int64) % n_ranks


register_placement("contiguous", _contiguous)
register_placement("round_robin", _round_robin)


def place_experts(name: str, n_experts: int, n_ranks: int) -> np.ndarray:
    """Expert -> EP rank map (int64 [n_experts], read-only); needs n_experts % n_ranks == 0.

    >>> place_experts("contiguous", 4, 2).tolist(), place_experts("round_robin", 4, 2).tolist()
    ([0, 0, 1, 1], [0, 1, 0, 1])
    """
    place = _PLACEMENTS.lookup(name)
    if n_ranks < 1 or n_experts % n_ranks != 0:
        raise ConfigError(
            "ep", f"EP size {n_ranks} must divide the {n_experts} experts (each rank hosts E/EP)"
        )
    ranks = np.asarray(place(n_experts, n_ranks), dtype=np.int64)
    ranks.setflags(write=False)
    return ranks
