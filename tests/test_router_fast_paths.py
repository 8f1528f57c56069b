"""The router's vectorised shortcuts against their plain definitions (moesim.router): the
first sampling round (``fresh_absorb``) against ``_Chosen.absorb``, and the counts of
``route_tokens`` under capacity and per-node dedup against a per-token reference."""

from __future__ import annotations

import numpy as np
import pytest

from moesim.router import RouterConfig, assign_experts, route_tokens
from moesim.router.route import capacity_per_expert
from moesim.router.sampling import _Chosen, distinct_columns, fresh_absorb, index_type


@pytest.mark.parametrize(("n_values", "m", "k"), [(384, 10, 8), (6, 12, 4), (9, 3, 5),
                                                 (70000, 9, 8), (3, 8, 3)])
def test_fresh_absorb_equals_absorb(n_values: int, m: int, k: int) -> None:
    rng = np.random.default_rng(n_values + m)
    cand = rng.integers(0, n_values, size=(m, 5000), dtype=np.int32)
    cand[rng.random(cand.shape) < 0.05] = -1  # holes (first_distinct's -1 entries)
    want = _Chosen(cand.shape[1], k)
    want.absorb(np.arange(cand.shape[1]), cand)
    got = fresh_absorb(cand.copy(), k)
    assert np.array_equal(got.chosen, want.chosen) and np.array_equal(got.found, want.found)


def _reference(cfg: RouterConfig, ranks: int, per_rank: int, experts: int, top_k: int,
               per_node: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(kept tokens per (rank, expert), distinct tokens per (rank, rank), per (rank, node)),
    token by token from ``assign_experts`` and the capacity rule of ``route_tokens``."""
    a = assign_experts(cfg, tokens_per_rank=per_rank, n_ranks=ranks, n_experts=experts,
                       top_k=top_k, seed=5, layer=2)
    cap = (capacity_per_expert(cfg.capacity_factor, per_rank, top_k, experts)
           if cfg.capacity_factor else per_rank * top_k)
    tokens = np.zeros((ranks, experts), dtype=np.int64)
    dedup = np.zeros((ranks, ranks), dtype=np.int64)
    nodes = np.zeros((ranks, ranks // per_node), dtype=np.int64)
    host = np.arange(experts) * ranks // experts  # contiguous placement
    for r in range(ranks):
        kept = np.zeros(a[r].shape, dtype=bool)
        seen = np.zeros(experts, dtype=np.int64)
        for slot in range(top_k):  # every token's first choice before any second
            for t in range(per_rank):
                e = a[r, t, slot]
                kept[t, slot] = seen[e] < cap
                seen[e] += 1
        for t in range(per_rank):
            hosts = host[a[r, t][kept[t]]]
            tokens[r] += np.bincount(a[r, t][kept[t]], minlength=experts)
            dedup[r, np.unique(hosts)] += 1
            nodes[r, np.unique(hosts // per_node)] += 1
    return tokens, dedup, nodes


@pytest.mark.parametrize("cfg", [RouterConfig(kind="zipf", alpha=1.2, capacity_factor=1.0),
                                 RouterConfig(kind="hot", hot_factor=6.0)])
@pytest.mark.parametrize("per_rank", [40, 300])  # 300: counted rank by rank (counts.pair_counts)
def test_route_counts_equal_a_per_token_reference(cfg: RouterConfig, per_rank: int) -> None:
    r = route_tokens(cfg, tokens_per_rank=per_rank, n_ranks=8, n_experts=32, top_k=4, seed=5,
                     layer=2, ranks_per_node=4)
    tokens, dedup, nodes = _reference(cfg, 8, per_rank, 32, 4, 4)
    assert np.array_equal(r.tokens, tokens)
    assert np.array_equal(r.rank_tokens_dedup, dedup)
    assert np.array_equal(r.node_tokens_dedup, nodes)
    assert np.array_equal(r.rank_tokens, tokens.reshape(8, 8, 4).sum(axis=2))


@pytest.mark.parametrize(("n_experts", "kind"), [(384, np.int16), (40000, np.int32)])
def test_sampler_columns_use_the_narrow_index_type_on_every_path(n_experts: int,
                                                                  kind: type) -> None:
    """Candidates and choices are int16 below 2^15 experts (half the bytes of every pass),
    on the candidate path and on the race path alike, with the same values as int64."""
    p = np.full(n_experts, 1.0 / n_experts)
    rng = np.random.default_rng(3)
    drawn = distinct_columns(p, 500, 4, rng, m=6,
                             draw=lambda rows, m: rng.integers(0, n_experts, (m, rows.size),
                                                               dtype=np.int32))
    raced = distinct_columns(p, 500, 4, np.random.default_rng(3), m=10**9, draw=None)
    assert index_type(n_experts) is kind and drawn.dtype == kind and raced.dtype == kind
    for columns in (drawn, raced):
        assert np.all(np.sort(columns, axis=0)[1:] != np.sort(columns, axis=0)[:-1])
