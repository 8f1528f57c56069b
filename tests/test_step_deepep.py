"""``dispatcher: deepep``: DeepEP's two legs (a token once per node over RDMA, then NVLink
forwarding) as the step's all-to-all traffic (moesim.workload.deepep)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from moesim.errors import ConfigError
from moesim.model import get_model
from moesim.parallel.layout import ParallelLayout
from moesim.router import UNIFORM, route_tokens
from moesim.scenario.schema import FabricSpec
from moesim.step import StepSpec, run_step
from moesim.step.plan import build_plan
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
