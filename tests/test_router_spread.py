"""Router spread: how many distinct EP ranks and nodes a token reaches, per router name,
against the arithmetic of a uniformly random top-k without replacement.

A token's k experts, drawn uniformly without replacement from E, miss a given rank holding e
of them with probability C(E - e, k) / C(E, k); the expected number of distinct ranks it
reaches is R (1 - C(E - e, k) / C(E, k)). For top-8 of 256 over EP64 (e = 4): 7.68 ranks;
over 8 nodes of 8 ranks (32 experts each): 5.29 nodes.
"""

from __future__ import annotations

from math import comb

import pytest

from moesim.router import BALANCED, FORCE_BALANCED, UNIFORM, RouterConfig, route_tokens

SHAPE = {"tokens_per_rank": 256, "n_ranks": 64, "n_experts": 256, "top_k": 8, "seed": 5,
         "layer": 2, "ranks_per_node": 8}
TOKENS = 256 * 64


def expected_distinct(holders: int, per_holder: int, n_experts: int, top_k: int) -> float:
    """Expected distinct holders (ranks or nodes) a uniform top-k token reaches."""
    return holders * (1 - comb(n_experts - per_holder, top_k) / comb(n_experts, top_k))


def test_arithmetic_by_hand() -> None:
    assert expected_distinct(64, 4, 256, 8) == pytest.approx(7.6758, abs=1e-3)
    assert expected_distinct(8, 32, 256, 8) == pytest.approx(5.2947, abs=1e-3)
    assert expected_distinct(2, 1, 2, 1) == 1.0


@pytest.mark.parametrize("cfg", [FORCE_BALANCED, UNIFORM], ids=["force_balanced", "uniform"])
def test_random_logit_router_spreads_like_the_arithmetic(cfg: RouterConfig) -> None:
    r = route_tokens(cfg, **SHAPE)
    ranks_per_token = r.rank_tokens_dedup.sum() / TOKENS
    nodes_per_token = r.node_tokens_dedup.sum() / TOKENS
    # 16384 tokens; a token's distinct-rank count has sd ~0.5: standard error ~0.004
    assert ranks_per_token == pytest.approx(expected_distinct(64, 4, 256, 8), rel=0.01)
    assert nodes_per_token == pytest.approx(expected_distinct(8, 32, 256, 8), rel=0.01)
    # balanced in expectation, not exactly: multinomial noise on 512 assignments per expert
    load = r.expert_load()
    assert load.sum() == TOKENS * 8 and load.min() < load.max()
    assert load.max() / load.mean() < 1.25


def test_force_balanced_is_megatrons_random_logits_not_consecutive_experts() -> None:
    chosen = route_tokens(FORCE_BALANCED, **SHAPE)
    consecutive = route_tokens(BALANCED, **SHAPE)
    # consecutive experts reach 2 ranks (8 experts over ranks of 4) and 1 node per token
    assert consecutive.rank_tokens_dedup.sum() / TOKENS == 2.0
    assert consecutive.node_tokens_dedup.sum() / TOKENS == 1.0
    assert chosen.rank_tokens_dedup.sum() / TOKENS > 7.4


def test_group_limited_force_balanced_reaches_at_most_topk_group_nodes() -> None:
    # DeepSeek-V3: 8 groups = 8 nodes of EP64, a token's experts in <= 4 of them
    r = route_tokens(FORCE_BALANCED, **SHAPE, n_group=8, topk_group=4)
    nodes = r.node_tokens_dedup.sum() / TOKENS
    assert 3.5 < nodes <= 4.0
