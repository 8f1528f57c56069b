"""The routing of one (layer, micro-batch): an immutable record of token counts."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True, eq=False)
class RoutingResult:
    """Token counts of one MoE layer for one micro-batch; every array is read-only.

    An *assignment* is one (token, expert) pair; a token makes top_k of them.
    """

    tokens: np.ndarray
    """int64 [n_ranks, n_experts]: kept assignments from each source rank to each expert."""
    dropped: np.ndarray
    """int64 [n_ranks, n_experts]: assignments dropped over capacity at the source rank."""
    expert_to_rank: np.ndarray
    """int64 [n_experts]: the EP rank hosting each expert."""
    rank_tokens: np.ndarray
    """int64 [n_ranks, n_ranks]: kept assignments src -> dst rank (2 experts on dst count 2)."""
    rank_tokens_dedup: np.ndarray
    """int64 [n_ranks, n_ranks]: distinct tokens src -> dst (DeepEP sends a token once per rank)."""
    popularity: np.ndarray
    """float64 [n_experts]: the expert popularity used (sums to 1)."""

    def __post_init__(self) -> None:
        for array in (self.tokens, self.dropped, self.expert_to_rank, self.rank_tokens,
                      self.rank_tokens_dedup, self.popularity):
            array.setflags(write=False)

    @property
    def n_ranks(self) -> int:
        """EP ranks (sources and destinations of the all-to-all)."""
        return int(self.tokens.shape[0])

    @property
    def n_experts(self) -> int:
        """Routed experts of the layer."""
        return int(self.tokens.shape[1])

    def expert_load(self) -> np.ndarray:
        """int64 [n_experts]: kept assignments each expert receives, over all sources."""
        return self.tokens.sum(axis=0)

    def rank_load(self) -> np.ndarray:
        """int64 [n_ranks]: kept assignments each rank's experts receive (its grouped-GEMM rows)."""
        return self.rank_tokens.sum(axis=0)

    def local_expert_load(self, rank: int) -> np.ndarray:
        """int64 [experts on rank]: load of the experts ``rank`` hosts, in expert-id order."""
        return self.expert_load()[self.experts_on(rank)]

    def experts_on(self, rank: int) -> np.ndarray:
        """int64: ids of the experts hosted by ``rank``, ascending."""
        return np.flatnonzero(self.expert_to_rank == rank)

    def dropped_total(self) -> int:
        """Assignments dropped by capacity, over all sources and experts."""
        return int(self.dropped.sum())

    def hot_experts(self, rank: int, top: int = 3) -> list[int]:
        """Up to ``top`` experts on ``rank``, heaviest first (ties: lower id first)."""
        experts = self.experts_on(rank)
        load = self.expert_load()[experts]
        order = np.lexsort((experts, -load))
        return [int(e) for e in experts[order][:top]]
