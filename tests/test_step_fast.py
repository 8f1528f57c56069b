"""Fast mode (one representative pipeline, estimated cross-replica collectives) against the
full simulation; its estimates against the engine are in test_step_estimate.py."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from fast_fixtures import LAYOUT, RAIL32

from moesim.errors import ConfigError
from moesim.fabric.build import build_graph
from moesim.fabric.subfabric import GraphIndex
from moesim.model import ModelConfig, get_model
from moesim.parallel.layout import ParallelLayout
from moesim.scenario.schema import FabricSpec
from moesim.step import StepResult, StepSpec, run_step
from moesim.step.fast import fast_plan, representative_ranks
from moesim.step.mode import Fast, StepMode, step_mode

FAULT = (("factor", 0.25), ("kind", "degrade"), ("link", ("h3/gpu1", "h3/nic1")))
"""Rank 13 (dp 13, stage 0): in EP group 8-15, not the representative pipeline (dp 0)."""


def _model(layers: int = 4) -> ModelConfig:
    return dataclasses.replace(get_model("mixtral-8x7b"), num_layers=layers,
                               moe_layers=(True,) * layers)


def _spec(fabric: FabricSpec = RAIL32, **kw: object) -> StepSpec:
    base: dict[str, object] = dict(model=_model(), layout=LAYOUT, seq_len=1024, fabric=fabric,
                                   microbatches=3)
    base.update(kw)
    return StepSpec(**base)  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def healthy() -> tuple[StepResult, StepResult]:
    return run_step(_spec()), run_step(_spec(), mode="fast")


def test_fast_agrees_with_full_on_a_symmetric_case(healthy: tuple[StepResult, StepResult]
                                                   ) -> None:
    full, fast = healthy
    assert fast.mode == "fast" and full.mode == "full"
    assert fast.step_time_s == pytest.approx(full.step_time_s, rel=0.05)
    assert sum(fast.breakdown_s.values()) == pytest.approx(fast.step_time_s, rel=1e-9)
    assert fast.last_rank in representative_ranks(LAYOUT)
    assert fast.engine["flows"] < full.engine["flows"] / 10  # only pipeline sends are flows


def test_degraded_link_of_another_replica(healthy: tuple[StepResult, StepResult]) -> None:
    """A NIC link of a replica outside the representative pipeline at 25 %: full mode slows
    down (0.0885 -> 0.139 s); fast mode's estimates do not see it; its whole-fabric phases
    do, as every flow there stands for every replica's copy, each held to the slowest copy's
    rate (moesim.engine.copies): 0.128 s, 8 % below full mode."""
    full, fast = healthy
    spec = _spec(fabric=dataclasses.replace(RAIL32, faults=(FAULT,)))
    slow_full = run_step(spec)
    assert slow_full.step_time_s > full.step_time_s * 1.3
    assert run_step(spec, "fast").step_time_s == pytest.approx(fast.step_time_s, rel=1e-12)
    phased = run_step(spec, Fast(phases="fabric"))
    assert phased.step_time_s == pytest.approx(slow_full.step_time_s, rel=0.1)


@pytest.mark.parametrize("slow_rank", [None, 0, 1])
def test_fused_moe_layers_time_as_their_events(healthy: tuple[StepResult, StepResult],
                                               slow_rank: int | None) -> None:
    """Fast mode runs each MoE layer as one timeout (moesim.step.program._fused_moe); with the
    fusion off every op and all-to-all is its own event again: the same step, booked alike
    (a slow GPU included: the representative itself, rank 0, or a member of its EP group,
    rank 1, whose late release delays the group's all-to-alls)."""
    spec = _spec() if slow_rank is None else _spec(slow_gpus=((slow_rank, 1.7),))
    fused = healthy[1] if slow_rank is None else run_step(spec, "fast")
    evented = run_step(spec, Fast(fuse_moe=False))
    assert fused.step_time_s == pytest.approx(evented.step_time_s, rel=1e-12)
    for k, v in evented.breakdown_s.items():
        assert fused.breakdown_s[k] == pytest.approx(v, rel=1e-9, abs=1e-15)


def test_representative_ranks_are_dp_zero() -> None:
    assert representative_ranks(LAYOUT) == [0, 16]
    lay = ParallelLayout(tp=2, pp=2, ep=4, dp=4)
    assert representative_ranks(lay) == [0, 1, 8, 9]  # dense rank tp + 2 * (dp + 4 * pp)



@pytest.mark.parametrize("multipath", ["dmodk", "ecmp"])
def test_subfabric_routes_are_the_whole_fabric_routes(multipath: str) -> None:
    """D-mod-K, and ECMP (hashing whole-fabric ids), on the pruned sub-fabric pick the same
    links (by name) as on the whole one."""
    spec = FabricSpec(preset="rail-h200-4096", params=(("hosts", 96), ("gpu", "H200")),
                      multipath=multipath)
    idx = GraphIndex(build_graph(spec), spec, "H200")
    gpus = [3, 70, 300, 301, 700]  # three SUs, two pods
    sub, whole = idx.router(gpus), idx.whole()
    src = np.array([g for g in gpus for _ in gpus])
    dst = np.array([h for _ in gpus for h in gpus])
    keep = src != dst
    a, b = sub.routes(src[keep], dst[keep]), whole.routes(src[keep], dst[keep])
    assert sub.fabric.n_links < whole.fabric.n_links / 10
    names_a = [sub.fabric.link_name(int(x)) for x in a.link]
    names_b = [whole.fabric.link_name(int(x)) for x in b.link]
    assert names_a == names_b
    np.testing.assert_allclose(a.latency_s, b.latency_s)



def test_routing_draws_reuse_routings_cyclically() -> None:
    spec = _spec()
    plan = fast_plan(spec, routing_draws=2)
    bytes_of = [layer.a2a_bytes["dispatch"] for layer in plan.layers]
    np.testing.assert_array_equal(bytes_of[0], bytes_of[2])
    np.testing.assert_array_equal(bytes_of[1], bytes_of[3])
    assert not np.array_equal(bytes_of[0], bytes_of[1])
    full = fast_plan(spec)
    assert not np.array_equal(full.layers[2].a2a_bytes["dispatch"], bytes_of[2])
    for bad in (0, -1, True, 1.5):
        with pytest.raises(ConfigError) as err:
            Fast(routing_draws=bad)  # type: ignore[arg-type]
        assert err.value.field == "fast.routing_draws"
    with pytest.raises(ConfigError) as err:
        Fast(phases="exact")
    assert err.value.field == "fast.phases"


def test_modes_are_strategies_that_leave_the_process_alone() -> None:
    """run_step takes a mode by name or as an object; neither patches a module nor leaves
    the garbage collector changed."""
    import gc

    import moesim.step.plan as plan_mod

    route, before = plan_mod.route_layer, (gc.isenabled(), gc.get_threshold())
    by_name = run_step(_spec(microbatches=1), "fast")
    by_object = run_step(_spec(microbatches=1), Fast(routing_draws=2))
    assert (gc.isenabled(), gc.get_threshold()) == before
    assert plan_mod.route_layer is route
    assert by_name.mode == by_object.mode == "fast"
    assert isinstance(step_mode("full"), StepMode) and step_mode("fast") == Fast()
    with pytest.raises(ConfigError) as err:
        step_mode(object())  # type: ignore[arg-type]
    assert err.value.field == "step.mode"


def test_unknown_mode_names_the_field() -> None:
    with pytest.raises(ConfigError) as err:
        run_step(_spec(), mode="quick")
    assert err.value.field == "step.mode"


def test_dp_ring_group_is_the_dense_dp_group() -> None:
    """The DP ring that fast mode's ring estimate and full mode's rings both take
    (moesim.step.groups.ring_group) is the DP x CP group."""
    from moesim.step.groups import dense_dp_group, ring_group

    lay = ParallelLayout(tp=2, cp=2, pp=2, ep=4, dp=2)
    for rank in (0, 5, 11, 14):
        assert ring_group(lay, "dp", rank) == dense_dp_group(lay, rank)


def test_subfabric_is_the_induced_subgraph_fabric() -> None:
    """The sub-fabric cut from the link arrays is fabric_for of the induced subgraph (GPUs
    renumbered in global order): same nodes, links, tiers and capacities, in the same order."""
    import networkx as nx

    from moesim.fabric.build import fabric_for

    spec = FabricSpec(preset="rail-h200-4096", params=(("hosts", 96), ("gpu", "H200")),
                      multipath="dmodk")
    graph = build_graph(spec)
    sub = GraphIndex(graph, spec, "H200").router([3, 70, 300, 301, 700]).fabric
    keep = set(sub.node_names)
    induced = nx.DiGraph(**graph.graph)  # in the whole graph's node and edge order
    induced.add_nodes_from((n, dict(d)) for n, d in graph.nodes(data=True) if n in keep)
    induced.add_edges_from((u, v, d) for u, v, d in graph.edges(data=True)
                           if u in keep and v in keep)
    gpu_nodes = [n for n, d in induced.nodes(data=True) if d["kind"] == "gpu"]
    for local, n in enumerate(sorted(gpu_nodes, key=lambda n: induced.nodes[n]["gpu"])):
        induced.nodes[n]["gpu"] = local
    ref = fabric_for(induced, "H200", True)
    assert sub.node_names == ref.node_names and sub.n_links == ref.n_links
    for name in ("link_src", "link_dst", "cap_Bps", "line_Bps", "latency_s", "gpu_nodes"):
        np.testing.assert_array_equal(getattr(sub, name), getattr(ref, name))
    assert list(sub.tier) == list(ref.tier) and list(sub.node_kind) == list(ref.node_kind)


def test_one_cached_pair_routes_as_in_a_batch() -> None:
    """A single cached pair (a point-to-point send) gets the route a batch call returns."""
    router = GraphIndex(build_graph(RAIL32), RAIL32, "H100").whole()
    src, dst = np.array([0, 5, 9, 31]), np.array([17, 30, 2, 4])
    batch = router.routes(src, dst)
    for i in range(src.size):
        one = router.routes(src[i : i + 1], dst[i : i + 1])
        lo, hi = batch.ptr[i], batch.ptr[i + 1]
        np.testing.assert_array_equal(one.ptr, [0, hi - lo])
        np.testing.assert_array_equal(one.link, batch.link[lo:hi])
        np.testing.assert_array_equal(one.weight, batch.weight[lo:hi])
        assert one.latency_s[0] == batch.latency_s[i] and one.cap_Bps[0] == batch.cap_Bps[i]


def test_block_router_gives_the_whole_fabric_routes() -> None:
    """Routes computed per pair of GPU blocks on their sub-fabric (BlockRouter) are the whole
    fabric's D-mod-K routes, in the whole fabric's link ids."""
    from moesim.fabric.blocks import BlockRouter

    spec = FabricSpec(preset="rail-h200-4096", params=(("hosts", 96), ("gpu", "H200")),
                      multipath="dmodk")
    idx = GraphIndex(build_graph(spec), spec, "H200")
    blocks, whole = BlockRouter(idx, 128), idx.whole()
    rng = np.random.default_rng(3)
    src = rng.integers(0, 768, 300)
    dst = (src + rng.integers(1, 767, 300)) % 768
    a, b = blocks.routes(src, dst), whole.routes(src, dst)
    for name in ("ptr", "link", "weight", "latency_s", "cap_Bps"):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name))
    assert len(blocks._routers) > 1  # several block pairs, each its own sub-fabric


def test_rank_rows_are_made_when_first_read() -> None:
    """StepState's per-rank rows (coordinates, compute resources) are made for the ranks a
    step reads; len and iteration are the whole world's, in rank order; the same row twice."""
    from moesim.step.state import RankRows

    made: list[int] = []
    rows = RankRows(5, lambda r: made.append(r) or {"rank": r})
    assert rows[3] == {"rank": 3} and rows[3] is rows[3] and made == [3]
    assert len(rows) == 5 and [row["rank"] for row in rows] == [0, 1, 2, 3, 4]
    assert made == [3, 0, 1, 2, 4]
    with pytest.raises(IndexError):
        rows[5]
