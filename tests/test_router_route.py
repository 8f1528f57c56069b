"""route_tokens: hand-computed counts, capacity, popularity keying, determinism, imbalance."""

from __future__ import annotations

import numpy as np
import pytest

from moesim.router import (
    BALANCED,
    RouterConfig,
    RoutingResult,
    assign_experts,
    balanced_assignments,
    capacity_per_expert,
    imbalance,
    layer_popularity,
    route_tokens,
)
from moesim.router.popularity import P_FLOOR_REL

SMALL = {"tokens_per_rank": 4, "n_ranks": 2, "n_experts": 4, "top_k": 2, "seed": 0, "layer": 0}
BIG = {"tokens_per_rank": 2048, "n_ranks": 4, "n_experts": 16, "top_k": 2, "seed": 3, "layer": 1}


def test_exact_balanced_contiguous_hand_computed() -> None:
    r = route_tokens(BALANCED, **SMALL)
    # rank 0 tokens take experts (0,1),(2,3),(0,1),(2,3); rank 1 continues the cycle: the same
    assert r.tokens.tolist() == [[2, 2, 2, 2], [2, 2, 2, 2]]
    assert r.dropped.tolist() == [[0] * 4, [0] * 4]
    assert r.expert_to_rank.tolist() == [0, 0, 1, 1]
    assert r.rank_tokens.tolist() == [[4, 4], [4, 4]]
    assert r.rank_tokens_dedup.tolist() == [[2, 2], [2, 2]]
    assert r.popularity.tolist() == [0.25] * 4


def test_exact_balanced_round_robin_hand_computed() -> None:
    r = route_tokens(RouterConfig(kind="exact_balanced", placement="round_robin"), **SMALL)
    assert r.expert_to_rank.tolist() == [0, 1, 0, 1]
    assert r.rank_tokens.tolist() == [[4, 4], [4, 4]]
    assert r.rank_tokens_dedup.tolist() == [[4, 4], [4, 4]]  # each token hits both ranks


def test_exact_balanced_remainder_rotates() -> None:
    # 3 tokens x top-1 over 2 experts: rank 0 sends 0,1,0; rank 1 continues 1,0,1
    r = route_tokens(BALANCED, tokens_per_rank=3, n_ranks=2, n_experts=2, top_k=1, seed=0,
                     layer=0)
    assert r.tokens.tolist() == [[2, 1], [1, 2]]
    assert r.expert_load().tolist() == [3, 3]
    assert balanced_assignments(2, 3, 1, 2)[:, :, 0].tolist() == [[0, 1, 0], [1, 0, 1]]


def test_capacity_hand_computed() -> None:
    # capacity = ceil(0.5 * 4 * 2 / 4) = 1; each rank wants 2 per expert -> keeps 1, drops 1.
    # Kept: every token's first choice before any second, earlier tokens first: tokens 0 and 1
    # keep both their experts (0,1 on rank 0; 2,3 on rank 1), tokens 2 and 3 lose both.
    r = route_tokens(RouterConfig(kind="exact_balanced", capacity_factor=0.5), **SMALL)
    assert capacity_per_expert(0.5, 4, 2, 4) == 1
    assert r.tokens.tolist() == [[1, 1, 1, 1], [1, 1, 1, 1]]
    assert r.dropped.tolist() == [[1, 1, 1, 1], [1, 1, 1, 1]]
    assert r.dropped_total() == 8
    assert r.rank_tokens.tolist() == [[2, 2], [2, 2]]
    assert r.rank_tokens_dedup.tolist() == [[1, 1], [1, 1]]
    assert imbalance(r)["dropped_fraction"] == 0.5


def test_capacity_per_expert_rounds_up() -> None:
    assert capacity_per_expert(1.25, 4096, 8, 256) == 160
    assert capacity_per_expert(1.0, 10, 3, 7) == 5


def test_capacity_caps_every_source_expert_pair() -> None:
    cfg = RouterConfig(kind="zipf", alpha=1.5, capacity_factor=1.0)
    r = route_tokens(cfg, **BIG)
    capacity = capacity_per_expert(1.0, 2048, 2, 16)
    wanted = route_tokens(RouterConfig(kind="zipf", alpha=1.5), **BIG).tokens
    assert r.tokens.max() <= capacity and r.dropped_total() > 0
    assert (r.tokens == np.minimum(wanted, capacity)).all()
    assert (r.tokens + r.dropped == wanted).all()


def test_imbalance_of_balanced_is_one() -> None:
    # 4 ranks x 2048 tokens x top-2 = 16384 assignments: 1024 per expert, 4096 per rank
    im = imbalance(route_tokens(BALANCED, **BIG))
    assert im == {"expert_max": 1024.0, "expert_mean": 1024.0, "expert_ratio": 1.0,
                  "rank_max": 4096.0, "rank_mean": 4096.0, "rank_ratio": 1.0,
                  "dropped_fraction": 0.0}


def test_result_helpers_hand_computed() -> None:
    r = RoutingResult(
        tokens=np.array([[5, 1, 3, 3], [0, 2, 0, 1]]),
        dropped=np.array([[1, 0, 0, 0], [0, 0, 0, 2]]),
        expert_to_rank=np.array([0, 0, 1, 1]),
        rank_tokens=np.array([[6, 6], [2, 1]]),
        rank_tokens_dedup=np.array([[4, 4], [2, 1]]),
        popularity=np.full(4, 0.25),
    )
    assert r.expert_load().tolist() == [5, 3, 3, 4]
    assert r.rank_load().tolist() == [8, 7]
    assert r.local_expert_load(1).tolist() == [3, 4]
    assert r.dropped_total() == 3
    assert r.hot_experts(0) == [0, 1] and r.hot_experts(1, top=1) == [3]
    assert r.hot_experts(1) == [3, 2]
    assert (r.n_ranks, r.n_experts) == (2, 4)
    with pytest.raises(ValueError):
        r.tokens[0, 0] = 9


def test_hot_expert_ties_break_by_id() -> None:
    r = route_tokens(BALANCED, **SMALL)
    assert r.hot_experts(1, top=3) == [2, 3]


def test_same_inputs_same_arrays_and_call_order_free() -> None:
    cfg = RouterConfig(kind="dirichlet", concentration=0.5)
    first = [route_tokens(cfg, **{**BIG, "layer": layer}) for layer in (0, 1, 2)]
    again = [route_tokens(cfg, **{**BIG, "layer": layer}) for layer in (2, 1, 0)][::-1]
    for a, b in zip(first, again, strict=True):
        assert (a.tokens == b.tokens).all() and (a.popularity == b.popularity).all()
        assert (a.rank_tokens_dedup == b.rank_tokens_dedup).all()
    assert not (first[0].tokens == first[1].tokens).all()


@pytest.mark.parametrize("kind", ["uniform", "zipf", "hot", "dirichlet", "force_biased"])
def test_different_seed_differs(kind: str) -> None:
    cfg = RouterConfig(kind=kind, bias_std=1.0)
    a = route_tokens(cfg, **BIG)
    b = route_tokens(cfg, **{**BIG, "seed": 4})
    assert not (a.tokens == b.tokens).all()


def test_exact_balanced_ignores_seed() -> None:
    a = route_tokens(BALANCED, **BIG)
    b = route_tokens(BALANCED, **{**BIG, "seed": 99, "layer": 7})
    assert (a.tokens == b.tokens).all() and (a.rank_tokens_dedup == b.rank_tokens_dedup).all()


def pop(cfg: RouterConfig, **keys: int) -> np.ndarray:
    return layer_popularity(cfg, n_experts=16, seed=1, **{"layer": 0, **keys})


def test_per_layer_popularity_is_fixed_across_microbatches_and_steps() -> None:
    cfg = RouterConfig(kind="zipf")
    assert (pop(cfg) == pop(cfg, microbatch=3, step=5)).all()
    assert not (pop(cfg) == pop(cfg, layer=1)).all()
    # the tokens still differ per micro-batch
    a = route_tokens(cfg, **BIG)
    b = route_tokens(cfg, **{**BIG, "microbatch": 1})
    assert (a.popularity == b.popularity).all() and not (a.tokens == b.tokens).all()


def test_per_microbatch_popularity_is_redrawn() -> None:
    cfg = RouterConfig(kind="zipf", resample="per_microbatch")
    assert not (pop(cfg) == pop(cfg, microbatch=1)).all()
    assert not (pop(cfg) == pop(cfg, step=1)).all()
    assert (pop(cfg, microbatch=2, step=3) == pop(cfg, microbatch=2, step=3)).all()


def test_force_biased_sign_rule() -> None:
    per_forward = RouterConfig(kind="force_biased", bias_std=1.0)
    per_layer = RouterConfig(kind="force_biased", bias_std=-1.0, resample="per_microbatch")
    assert not (pop(per_forward) == pop(per_forward, microbatch=1)).all()
    assert (pop(per_layer) == pop(per_layer, microbatch=1, step=2)).all()
    assert (pop(RouterConfig(kind="force_biased", bias_std=0.0)) == 1 / 16).all()


def test_drift_blends_draws_between_epochs() -> None:
    fixed = RouterConfig(kind="dirichlet")
    drifting = RouterConfig(kind="dirichlet", drift_steps=4)
    start, end = pop(drifting, step=0), pop(drifting, step=4)
    assert (start == pop(fixed)).all() and (pop(fixed, step=4) == start).all()
    assert not np.allclose(start, end)
    assert np.allclose(pop(drifting, step=2), (start + end) / 2)
    assert np.allclose(pop(drifting, step=1), 0.75 * start + 0.25 * end)


def test_popularity_models_hand_checked() -> None:
    zipf = pop(RouterConfig(kind="zipf", alpha=1.0))
    assert np.allclose(np.sort(zipf)[::-1], (1 / np.arange(1, 17)) / (1 / np.arange(1, 17)).sum())
    hot = pop(RouterConfig(kind="hot", hot_experts=2, hot_factor=4.0))
    assert np.allclose(np.sort(hot), [1 / 22] * 14 + [4 / 22] * 2)
    assert np.allclose(pop(RouterConfig(kind="zipf", alpha=0.0)), 1 / 16)
    skewed = pop(RouterConfig(kind="dirichlet", concentration=0.001))
    assert skewed.min() >= P_FLOOR_REL / 16 * 0.999 and skewed.sum() == pytest.approx(1.0)


def test_zipf_large_alpha_concentrates_load() -> None:
    r = route_tokens(RouterConfig(kind="zipf", alpha=6.0), **BIG)
    # p_top = 1 / zeta(6) ~ 0.98: nearly every token picks the top expert
    assert r.expert_load().max() >= 0.95 * 4 * 2048
    assert imbalance(r)["expert_ratio"] > 7.0
    assert imbalance(route_tokens(RouterConfig(), **BIG))["expert_ratio"] < 1.2


def test_hot_expert_gets_hot_factor_share() -> None:
    cfg = RouterConfig(kind="hot", hot_experts=1, hot_factor=4.0)
    r = route_tokens(cfg, **{**BIG, "top_k": 1})
    load = r.expert_load()
    hot = int(np.argmax(r.popularity))
    ratio = load[hot] / np.delete(load, hot).mean()
    assert 3.6 < ratio < 4.4


def test_assign_experts_matches_route_counts() -> None:
    cfg = RouterConfig(kind="zipf", alpha=1.2, placement="round_robin")
    kw = {**BIG, "n_group": 4, "topk_group": 2}
    chosen = assign_experts(cfg, **kw)
    r = route_tokens(cfg, **kw)
    counts = np.stack([np.bincount(c.ravel(), minlength=16) for c in chosen])
    assert (counts == r.tokens).all()
    dst = r.expert_to_rank[chosen]
    dedup = np.stack([[np.any(d == rank, axis=1).sum() for rank in range(4)] for d in dst])
    assert (dedup == r.rank_tokens_dedup).all()
