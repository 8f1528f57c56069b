"""The routing of one (layer, micro-batch): an immutable record of token counts."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


@dataclass(frozen=True, eq=False)
class RoutingResult:
    """Token counts of one MoE layer for one micro-batch; every array is read-only.

    An *assignment* is one (token, expert) pair; a token makes top_k of them. With redundant
    experts (``RouterConfig.redundant_experts``) the expert axis has one column per expert copy:
    the originals first, then the replicas, named by ``replica_of``.
    """

    tokens: np.ndarray
    """int64 [n_ranks, n_experts]: kept assignments from each source rank to each expert copy."""
    dropped: np.ndarray
    """int64 [n_ranks, n_experts]: assignments dropped over capacity at the source rank
    (drops happen before replication: replica columns are 0)."""
    expert_to_rank: np.ndarray
    """int64 [n_experts]: the EP rank hosting each expert copy."""
    rank_tokens: np.ndarray
    """int64 [n_ranks, n_ranks]: kept assignments src -> dst rank (2 experts on dst count 2)."""
    rank_tokens_dedup: np.ndarray
    """int64 [n_ranks, n_ranks]: distinct tokens src -> dst (DeepEP sends a token once per rank)."""
    popularity: np.ndarray
    """float64 [original experts]: the expert popularity used (sums to 1)."""
    replica_of: np.ndarray = field(default_factory=lambda: np.empty(0, dtype=np.int64))
    """int64 [n_experts]: the original expert a replica column copies, -1 for originals
    (empty = no replicas: filled with -1)."""
    node_tokens_dedup: np.ndarray = field(
        default_factory=lambda: np.zeros((0, 0), dtype=np.int64))
    """int64 [n_ranks, nodes]: distinct tokens src -> node (DeepEP's RDMA sends a token once
    per node); 0 x 0 unless routed with ``ranks_per_node``."""

    def __post_init__(self) -> None:
        if self.replica_of.size == 0:
            object.__setattr__(self, "replica_of", np.full(self.n_experts, -1, dtype=np.int64))
        for array in (self.tokens, self.dropped, self.expert_to_rank, self.rank_tokens,
                      self.rank_tokens_dedup, self.popularity, self.replica_of,
                      self.node_tokens_dedup):
            array.setflags(write=False)

    @property
    def n_ranks(self) -> int:
        """EP ranks (sources and destinations of the all-to-all)."""
        return int(self.tokens.shape[0])

    @property
    def n_experts(self) -> int:
        """Expert columns: the layer's routed experts plus any replicas."""
        return int(self.tokens.shape[1])

    @property
    def n_replicas(self) -> int:
        """Redundant expert copies (0 without ``redundant_experts``)."""
        return int(np.count_nonzero(self.replica_of >= 0))

    def original_of(self) -> np.ndarray:
        """int64 [n_experts]: the original expert id of each column (itself for originals)."""
        return np.where(self.replica_of >= 0, self.replica_of, np.arange(self.n_experts))

    def expert_load(self) -> np.ndarray:
        """int64 [n_experts]: kept assignments each expert copy receives, over all sources."""
        return self.tokens.sum(axis=0)

    def original_expert_load(self) -> np.ndarray:
        """int64 [original experts]: kept assignments per expert, replicas folded back."""
        n_original = self.n_experts - self.n_replicas
        return np.bincount(self.original_of(), weights=self.expert_load(),
                           minlength=n_original).astype(np.int64)

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
        """Up to ``top`` experts on ``rank``, heaviest first (ties: lower column first), by the
        load of the copy ``rank`` hosts; a replica is named by its original expert's id."""
        experts = self.experts_on(rank)
        load = self.expert_load()[experts]
        order = np.lexsort((experts, -load))
        return [int(e) for e in self.original_of()[experts[order][:top]]]
