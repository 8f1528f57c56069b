"""A rank's communication groups, looked up once per (layout, group, rank).

:class:`moesim.parallel.ParallelLayout` is frozen, so its group lookups are cached here for the
step's hot paths (every TP/CP collective, every gradient ring of full and fast mode).
"""

from __future__ import annotations

from functools import lru_cache

from moesim.parallel.layout import ParallelLayout


@lru_cache(maxsize=4096)
def group(lay: ParallelLayout, kind: str, rank: int) -> tuple[int, ...]:
    """``lay.group_of(kind, rank)``, cached (the layout is frozen)."""
    return lay.group_of(kind, rank)


@lru_cache(maxsize=4096)
def dense_dp_group(lay: ParallelLayout, rank: int) -> tuple[int, ...]:
    """``lay.dense_dp_group(rank)`` (the DP x CP group), cached (the layout is frozen)."""
    return lay.dense_dp_group(rank)


def ring_group(lay: ParallelLayout, ring: str, rank: int) -> tuple[int, ...]:
    """The ranks of ``rank``'s gradient ring ``ring``: "dp" is the DP x CP group (dense
    parameters), "edp" the expert-data-parallel group."""
    return dense_dp_group(lay, rank) if ring == "dp" else group(lay, ring, rank)
