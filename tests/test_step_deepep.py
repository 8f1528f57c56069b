"""``dispatcher: deepep``: DeepEP's two legs (a token once per node over RDMA, then NVLink
forwarding) as the step's all-to-all traffic (moesim.workload.deepep)."""

from __future__ import annotations

import dataclasses
from math import comb

import numpy as np
import pytest

from moesim.errors import ConfigError
from moesim.model import get_model
from moesim.parallel.layout import ParallelLayout
from moesim.router import UNIFORM, route_tokens
from moesim.scenario.schema import FabricSpec
from moesim.step import StepSpec, run_step
from moesim.step.plan import build_plan
from moesim.workload.costs import token_bytes
from moesim.workload.deepep import hierarchical_tokens

TWO_HOSTS = FabricSpec(preset="rail-h800-64", params=(("hosts", 2),), multipath="dmodk",
                       batch_window_rel=0.02)


def _routing(ep: int = 16, per_node: int = 8):
    return route_tokens(UNIFORM, tokens_per_rank=256, n_ranks=ep, n_experts=64, top_k=8,
                        seed=3, layer=1, ranks_per_node=per_node)


def test_node_counts_by_hand() -> None:
    """Every distinct (token, node) pair once: the node count of a token is at most its
    distinct ranks, and at least one."""
    r = _routing()
    node = r.node_tokens_dedup
    assert node.shape == (16, 2)
    by_rank = r.rank_tokens_dedup.reshape(16, 2, 8)
    assert (node <= by_rank.sum(axis=2)).all() and (node >= by_rank.max(axis=2)).all()
    assert (node.sum(axis=1) >= 256).all() and (node.sum(axis=1) <= 2 * 256).all()


def test_legs_carry_each_token_once_per_node_then_once_per_rank() -> None:
    r = _routing()
    tokens = hierarchical_tokens(r.rank_tokens_dedup, r.node_tokens_dedup, 8)
    node_of = np.arange(16) // 8
    cross = node_of[:, None] != node_of[None, :]
    # RDMA: each rank sends, to the rail peer of every other node, that node's distinct tokens
    np.testing.assert_array_equal((tokens * cross).sum(axis=1),
                                  r.node_tokens_dedup[np.arange(16), 1 - node_of])
    assert (tokens[cross & (np.arange(16)[:, None] % 8 != np.arange(16)[None, :] % 8)] == 0).all()
    # NVLink (and local copies): every rank receives each token it needs exactly once
    np.testing.assert_array_equal((tokens * ~cross).sum(axis=0),
                                  r.rank_tokens_dedup.sum(axis=0))


def test_one_node_is_the_rank_level_all_to_all() -> None:
    r = _routing(ep=8)
    np.testing.assert_array_equal(
        hierarchical_tokens(r.rank_tokens_dedup, r.node_tokens_dedup, 8), r.rank_tokens_dedup)


def _spec(dispatcher: str) -> StepSpec:
    model = get_model("deepseek-v3")
    model = dataclasses.replace(model, num_layers=2, moe_layers=(False, True))
    return StepSpec(model=model, layout=ParallelLayout(ep=16, dp=16), gpu="H800",
                    fabric=TWO_HOSTS, seq_len=1024, dispatcher=dispatcher)


def test_deepep_sends_fewer_bytes_across_nodes_and_waits_less() -> None:
    plans = {d: build_plan(_spec(d)) for d in ("alltoall", "deepep")}
    node_of = np.arange(16) // 8
    cross = node_of[:, None] != node_of[None, :]
    moe = plans["deepep"].layers[1]
    flat = plans["alltoall"].layers[1]
    for phase in ("dispatch", "combine"):
        assert (moe.a2a_bytes[phase] * cross).sum() < 0.8 * (flat.a2a_bytes[phase] * cross).sum()
    runs = {d: run_step(_spec(d)) for d in ("alltoall", "deepep")}
    assert runs["deepep"].breakdown_s["a2a_exposed"] < runs["alltoall"].breakdown_s["a2a_exposed"]
    assert runs["deepep"].breakdown_s["compute"] == pytest.approx(
        runs["alltoall"].breakdown_s["compute"], rel=1e-12)


def test_bad_dispatcher_setups_are_named() -> None:
    with pytest.raises(ConfigError) as err:
        dataclasses.replace(_spec("deepep"), dispatcher="nccl")
    assert err.value.field == "step.dispatcher"
    with pytest.raises(ConfigError, match="etp = 1"):
        dataclasses.replace(_spec("deepep"), layout=ParallelLayout(ep=8, etp=2, tp=2, dp=8))
    spec = dataclasses.replace(_spec("deepep"), fabric=FabricSpec(
        preset="rail-h800-64", params=(("hosts", 4), ("gpus_per_host", 4))))
    with pytest.raises(ConfigError, match="NVLink domains of 8"):
        run_step(spec)


def _cross_node_dispatch_bytes(tp: int) -> tuple[float, float, int]:
    """(cross-node dispatch bytes of layer 1 in the plan, hand arithmetic, per-node EP ranks)
    for EP16 (etp 1) on 16 H800 ranks = 2 nodes, at TP ``tp`` (dp = 16 / tp)."""
    model = dataclasses.replace(get_model("deepseek-v3"), num_layers=2,
                                moe_layers=(False, True), n_group=1, topk_group=1)
    spec = StepSpec(model=model, layout=ParallelLayout(tp=tp, ep=16, dp=16 // tp), gpu="H800",
                    fabric=TWO_HOSTS, seq_len=1024, dispatcher="deepep")
    per_node = spec.ep_ranks_per_node()
    a2a = build_plan(spec).layers[1].a2a_bytes["dispatch"]
    node_of = np.arange(16) // 8  # EP index i is global rank i (etp 1): 8 per node
    cross = (a2a * (node_of[:, None] != node_of[None, :])).sum()
    # Hand: each rank sends each of its tokens once to the other node iff >= 1 of its 8
    # experts (of 256; 128 per node) lives there: P = 1 - C(128, 8) / C(256, 8); one FP8 token
    # is hidden bytes (7168) plus 4 bytes of scale per 128 values (deepseek-v3 block FP8).
    tokens = 1024 // tp
    p_other = 1 - comb(128, 8) / comb(256, 8)
    hand = 16 * tokens * p_other * token_bytes(7168, "fp8")
    return float(cross), hand, per_node


@pytest.mark.parametrize("tp", [1, 2])
def test_deepep_cross_node_bytes_by_hand(tp: int) -> None:
    """EP groups are runs of 8 consecutive ranks per node whatever tp is (expert grid), so
    TP2 halves the tokens per rank (sequence parallel) but not the EP ranks per node."""
    cross, hand, per_node = _cross_node_dispatch_bytes(tp)
    assert per_node == 8
    # 16 x 1024/tp tokens; the other-node indicator has sd <= 0.5: within 2% of the mean
    assert cross == pytest.approx(hand, rel=0.02)
