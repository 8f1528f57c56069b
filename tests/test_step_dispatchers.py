"""Each dispatcher on a small case worked by hand: 2 nodes x 8 H800 (EP16), 2 experts per
rank, 4 tokens per rank whose experts are chosen so every matrix entry is known
(moesim.workload.dispatchers); then the NIC bytes of real flows on the rail fabric."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from moesim import topologies
from moesim.errors import ConfigError
from moesim.model import get_model
from moesim.parallel.layout import ParallelLayout
from moesim.router import RoutingResult
from moesim.router.counts import dedup_rank_tokens, node_dedup, pair_counts, rank_totals
from moesim.scenario.schema import FabricSpec
from moesim.scenario.spec import Workload
from moesim.step import StepSpec
from moesim.step.plan import build_plan
from moesim.validate.flows import FlowBatch, run_flows
from moesim.workload.costs import token_bytes
from moesim.workload.dispatchers import DISPATCHER_NAMES, get_dispatcher

EP, G, T = 16, 8, 4  # ranks, ranks per node, tokens per rank
RANK = np.arange(EP)
PEER = (RANK + G) % EP  # the rail peer on the other node (same local index)
NEXT = RANK // G * G + (RANK + 1) % G  # the next rank of the own node
PEER_NEXT = PEER // G * G + (RANK + 1) % G  # the other node's rank one rail over


def _hand_routing(ranks_per_node: int = G) -> RoutingResult:
    """Top-2 of 32 experts (experts 2r, 2r+1 on rank r). Rank s's tokens pick:
    t0 both experts of PEER[s]; t1 one of PEER[s] and one of PEER_NEXT[s]; t2 both of s
    itself; t3 one of NEXT[s] and one of PEER[s]. Counted by the router's own counters."""
    first = np.stack([2 * PEER, 2 * PEER, 2 * RANK, 2 * NEXT], axis=1)  # [rank, token]
    second = np.stack([2 * PEER + 1, 2 * PEER_NEXT, 2 * RANK + 1, 2 * PEER + 1], axis=1)
    columns = np.stack([first.ravel(), second.ravel()])  # [top_k, rank-major tokens]
    expert_to_rank = np.arange(2 * EP) // 2
    tokens = pair_counts(columns, T, EP, 2 * EP)
    dst = columns // 2
    rank_tokens = rank_totals(tokens, expert_to_rank, EP)
    return RoutingResult(
        tokens=tokens, dropped=np.zeros_like(tokens), expert_to_rank=expert_to_rank,
        rank_tokens=rank_tokens, rank_tokens_dedup=dedup_rank_tokens(dst, None, rank_tokens),
        popularity=np.full(2 * EP, 1 / (2 * EP)),
        node_tokens_dedup=node_dedup(dst, None, rank_tokens, ranks_per_node))


def _matrix(*entries: tuple[np.ndarray, int]) -> np.ndarray:
    """[EP, EP]: ``n`` tokens from every rank s to ``dst[s]``, for each (dst, n)."""
    out = np.zeros((EP, EP))
    for dst, n in entries:
        np.add.at(out, (RANK, dst), n)
    return out


def test_each_dispatcher_moves_the_hand_counted_tokens() -> None:
    r = _hand_routing()
    tokens = {d: get_dispatcher(d).tokens(r, dedup=True, node_ranks=get_dispatcher(d)
                                          .node_ranks(G)) for d in DISPATCHER_NAMES}
    # alltoall (dedup): a token once per destination rank: PEER gets t0 t1 t3, PEER_NEXT t1,
    # itself t2, NEXT t3
    np.testing.assert_array_equal(tokens["alltoall"], _matrix(
        (PEER, 3), (PEER_NEXT, 1), (RANK, 1), (NEXT, 1)))
    # deepep-ll: one copy per routed expert, straight to its rank (t0 twice to PEER)
    np.testing.assert_array_equal(tokens["deepep-ll"], _matrix(
        (PEER, 4), (PEER_NEXT, 1), (RANK, 2), (NEXT, 1)))
    # deepep / hybridep on 8-GPU nodes: RDMA once per (token, other node) to the rail peer
    # (t0 t1 t3 = 3); the peer keeps its share (3 local copies of the sender's tokens + 1 of
    # its own t2) and forwards t1 one rail over, where its own t3 also goes (1 + 1)
    two_legs = _matrix((PEER, 3), (RANK, 1 + 3), (NEXT, 1 + 1))
    np.testing.assert_array_equal(tokens["deepep"], two_legs)
    np.testing.assert_array_equal(tokens["hybridep"], two_legs)


def test_node_size_is_where_deepep_and_hybridep_part() -> None:
    """One NVLink domain of 16 (an NVL72 rack): HybridEP forwards within the whole domain, so
    it sends each token once per rank (alltoall's dedup matrix); DeepEP V1 still forwards
    among runs of 8 (NUM_MAX_NVL_PEERS)."""
    assert get_dispatcher("hybridep").node_ranks(16) == 16
    assert get_dispatcher("deepep").node_ranks(16) == 8
    assert get_dispatcher("deepep").node_ranks(4) == 4
    r = _hand_routing(ranks_per_node=16)
    np.testing.assert_array_equal(get_dispatcher("hybridep").tokens(r, dedup=True, node_ranks=16),
                                  r.rank_tokens_dedup)
    with pytest.raises(ConfigError, match="runs of 8"):
        get_dispatcher("deepep").node_ranks(36)


def test_nic_bytes_of_real_flows_by_hand() -> None:
    """The FP8 dispatch of the hand routing as flows on 2 rail-optimised H800 nodes: each
    GPU's NIC carries its cross-node bytes out and the same in (uniform by construction)."""
    hidden = 7168
    fp8 = token_bytes(hidden, "fp8")  # 7168 + 7168 / 128 * 4 = 7392 bytes
    assert fp8 == 7392
    header = get_dispatcher("deepep-ll").header_bytes
    per_nic = {"alltoall": (3 + 1) * fp8, "deepep-ll": (4 + 1) * (fp8 + header),
               "deepep": 3 * fp8, "hybridep": 3 * fp8}
    graph = topologies.load_preset("rail-h800-64", hosts=2)
    r = _hand_routing()
    for name, hand in per_nic.items():
        d = get_dispatcher(name)
        size = d.tokens(r, dedup=True, node_ranks=d.node_ranks(G)) * (fp8 + d.header_bytes)
        src, dst = np.nonzero(~np.eye(EP, dtype=bool) & (size > 0))
        run = run_flows(graph, FlowBatch(src, dst, size[src, dst]))
        nic = run.fabric.tier == "nic"
        # every NIC link (NIC -> leaf up, leaf -> NIC down; 2 per GPU) carries one GPU's share
        assert np.count_nonzero(nic) == 2 * EP
        np.testing.assert_allclose(run.link_bytes[nic], hand, rtol=1e-12)


TWO_HOSTS = FabricSpec(preset="rail-h800-64", params=(("hosts", 2),), multipath="dmodk",
                       batch_window_rel=0.02)


def _spec(dispatcher: str) -> StepSpec:
    model = dataclasses.replace(get_model("deepseek-v3"), num_layers=2, moe_layers=(False, True))
    return StepSpec(model=model, layout=ParallelLayout(ep=16, dp=16), gpu="H800",
                    fabric=TWO_HOSTS, seq_len=1024, dispatcher=dispatcher)


def test_step_plan_charges_the_ll_header_on_dispatch_shaped_phases_only() -> None:
    """deepep-ll's plan: per-expert copies (rank_tokens) x (FP8 token + 16 B) for dispatch and
    combine_bwd, x BF16 token for the transposed combine and dispatch_bwd."""
    spec = _spec("deepep-ll")
    layer = build_plan(spec).layers[1]
    per_expert = layer.a2a_bytes["dispatch"] / (token_bytes(7168, "fp8") + 16)
    np.testing.assert_allclose(per_expert.sum(axis=1), 1024 * 8)  # every (token, expert) copy
    np.testing.assert_allclose(layer.a2a_bytes["combine"],
                               per_expert.T * token_bytes(7168, "bf16"))
    np.testing.assert_allclose(layer.a2a_bytes["combine_bwd"],
                               per_expert * (token_bytes(7168, "bf16") + 16))


def test_bad_names_are_rejected_in_one_field() -> None:
    with pytest.raises(ConfigError) as err:
        _spec("nccl-ep")
    assert err.value.field == "step.dispatcher" and "deepep-ll, hybridep" in err.value.problem
    with pytest.raises(ConfigError) as err:
        Workload(dispatcher="hybrid-ep")
    assert err.value.field == "workload.dispatcher"
    for name in DISPATCHER_NAMES:
        assert Workload(dispatcher=name).dispatcher == name
    with pytest.raises(ConfigError, match="etp = 1"):
        dataclasses.replace(_spec("deepep-ll"), layout=ParallelLayout(ep=8, etp=2, tp=2, dp=8))


def test_on_one_nvl72_rack_hybridep_is_per_rank_and_deepep_forwards_within_8() -> None:
    """EP16 on the first 16 GPUs of a GB200 NVL72 rack: HybridEP's node is the rack, so its
    dispatch is alltoall's per-rank dedup matrix; DeepEP V1 still sends a token once per run
    of 8 ranks to the rail peer, which forwards it."""
    model = dataclasses.replace(get_model("deepseek-v3"), num_layers=2, moe_layers=(False, True))
    rack = FabricSpec(preset="nvl72-gb200", multipath="dmodk", batch_window_rel=0.02)
    plans = {d: build_plan(StepSpec(model=model, layout=ParallelLayout(ep=16, dp=16),
                                    gpu="GB200", fabric=rack, seq_len=1024, dispatcher=d))
             for d in ("alltoall", "hybridep", "deepep")}
    a2a = {d: p.layers[1].a2a_bytes["dispatch"] for d, p in plans.items()}
    np.testing.assert_array_equal(a2a["hybridep"], a2a["alltoall"])
    run_of = np.arange(16) // 8
    across = run_of[:, None] != run_of[None, :]
    rail = np.arange(16)[:, None] % 8 == np.arange(16)[None, :] % 8
    assert (a2a["deepep"][across & ~rail] == 0).all()  # across runs of 8: rail peers only
    assert (a2a["deepep"][across & rail] > 0).all()
    assert not np.array_equal(a2a["deepep"], a2a["hybridep"])
