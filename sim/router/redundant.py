"""Redundant copies of hot experts (EPLB-style), applied to one layer's drawn assignments.

DeepSeek-V3 (arXiv 2412.19437, section 3.4 "Inference and Deployment") deploys *redundant
experts*: the most loaded experts get a duplicate on another GPU, and their tokens are split
between the copies; DeepSeek's EPLB (github.com/deepseek-ai/EPLB) picks which experts to
replicate from observed loads and packs copies greedily onto the least loaded GPUs.

Model here (a deliberately simple, deterministic version of that):

* the ``count`` experts with the most kept assignments (ties: lower id first) are candidates for
  ONE replica each;
* in that order, each replica goes to the EP rank with the lowest load at that point, never the
  rank hosting the original (ties: lower rank id), and the rank loads are updated as it moves;
* a candidate whose copy would not lower the busier of (host, target) - target load + moved
  >= host load, or nothing to move - gets no replica (EPLB only replicates to balance; without
  this guard a balanced router would be made worse), so a layer has *up to* ``count`` replicas;
* each source rank splits its kept assignments to a replicated expert evenly: the first
  ceil(c/2) in (slot, token) order stay with the original, the other floor(c/2) go to the
  replica.

Replicas become extra expert columns ``n_experts + j`` so that counts per expert column and the
per-rank GEMM loads need no special casing downstream; ``replica_of[n_experts + j]`` names the
original (and is -1 for originals).
"""

from __future__ import annotations

import numpy as np

from moesim.errors import ConfigError


def check_redundant(count: int, *, n_experts: int, n_ranks: int) -> None:
    """Route-time checks of ``router.redundant_experts`` against the layer shape."""
    if count == 0:
        return
    if count >= n_experts:
        raise ConfigError(
            "router.redundant_experts", f"must be < n_experts ({n_experts}), got {count}"
        )
    if n_ranks < 2:
        raise ConfigError(
            "router.redundant_experts", "a replica needs another EP rank: use ep >= 2, or 0"
        )


def _split_mask(chosen: np.ndarray, n_ranks: int) -> np.ndarray:
    """bool like ``chosen`` [top_k, n_tokens]: per source rank, the chosen assignments after the
    first ceil(c/2) in (slot, token) order - the ones the replica takes."""
    top_k = chosen.shape[0]
    per_rank = chosen.reshape(top_k, n_ranks, -1).transpose(1, 0, 2).reshape(n_ranks, -1)
    occurrence = np.cumsum(per_rank, axis=1)
    stay = (per_rank.sum(axis=1) + 1) // 2
    move = per_rank & (occurrence > stay[:, None])
    return move.reshape(n_ranks, top_k, -1).transpose(1, 0, 2).reshape(top_k, -1)


def replicate_hot_experts(
    columns: np.ndarray, kept: np.ndarray, expert_to_rank: np.ndarray, *, n_ranks: int,
    count: int,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Give up to the ``count`` most loaded experts one replica each (see the module docstring).

    ``columns`` int [top_k, n_ranks * tokens_per_rank] (rank-major tokens) and ``kept`` bool like
    it. Returns (columns with moved assignments renumbered to replica ids, expert_to_rank
    extended to [n_experts + replicas], replica_of [n_experts + replicas], -1 for originals).
    Loops over the replicas, not over tokens."""
    n_experts = expert_to_rank.size
    load = np.bincount(columns[kept], minlength=n_experts)
    rank_load = np.bincount(expert_to_rank, weights=load, minlength=n_ranks)
    hottest = np.lexsort((np.arange(n_experts), -load))[:count]
    out = columns.astype(np.int64, copy=True)
    originals: list[int] = []
    hosts: list[int] = []
    for expert in hottest:
        move = _split_mask((columns == expert) & kept, n_ranks)
        host = int(expert_to_rank[expert])
        target = int(np.argmin(np.where(np.arange(n_ranks) == host, np.inf, rank_load)))
        moved = int(move.sum())
        if moved == 0 or rank_load[target] + moved >= rank_load[host]:
            continue  # this copy would not lower the busier of the two ranks
        rank_load[host] -= moved
        rank_load[target] += moved
        out[move] = n_experts + len(originals)
        originals.append(int(expert))
        hosts.append(target)
    replica_of = np.concatenate([np.full(n_experts, -1, dtype=np.int64),
                                 np.array(originals, dtype=np.int64)])
    placement = np.concatenate([expert_to_rank.astype(np.int64), np.array(hosts, dtype=np.int64)])
    return out, placement, replica_of
