"""Imbalance summaries of a routing, as plain numbers for reports."""

from __future__ import annotations

from moesim.router.result import RoutingResult


def imbalance(result: RoutingResult) -> dict[str, float]:
    """Max and mean load per expert and per EP rank, their ratios, and the dropped share.

    ``expert_ratio`` = max/mean expert load (1.0 = perfectly balanced); ``rank_ratio`` the same
    over the assignments each rank's experts receive - the straggler factor of the grouped GEMMs.
    Expert figures fold redundant copies back into their original (the router's skew); rank
    figures include them (what each rank computes).
    """
    expert = result.original_expert_load()
    rank = result.rank_load()
    kept = float(expert.sum())
    total = kept + result.dropped_total()
    expert_mean = float(expert.mean())
    rank_mean = float(rank.mean())
    return {
        "expert_max": float(expert.max()),
        "expert_mean": expert_mean,
        "expert_ratio": float(expert.max()) / expert_mean if expert_mean > 0 else 1.0,
        "rank_max": float(rank.max()),
        "rank_mean": rank_mean,
        "rank_ratio": float(rank.max()) / rank_mean if rank_mean > 0 else 1.0,
        "dropped_fraction": (total - kept) / total if total > 0 else 0.0,
    }
