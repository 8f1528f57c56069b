"""Rings timed in closed form (moesim.collectives.fused_ring) against rings of flows, and fast
mode's TP rings fused against the same step with every chunk a flow."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import numpy as np
import pytest
import simpy

from moesim.collectives.fused_ring import FusedRing, ring_edges
from moesim.collectives.ring import ring_all_gather, ring_reduce_scatter
from moesim.engine.network import FlowNetwork
from moesim.engine.routing import Router
from moesim.fabric.build import build_graph, fabric_for
from moesim.fabric.spec import FabricSpec
from moesim.model import get_model
from moesim.parallel.layout import ParallelLayout
from moesim.step import Fast, StepSpec, run_step


def _router() -> Router:
    spec = FabricSpec(preset="hgx-h100")
    return Router(fabric_for(build_graph(spec), "H100", True), "dmodk")


def _starter(ring: object, rank: int) -> Callable[[simpy.Event], None]:
    def go(_: simpy.Event) -> None:
        ring.start_rank(rank)  # type: ignore[attr-defined]

    return go


@pytest.mark.parametrize("n", [2, 4, 8])
@pytest.mark.parametrize("kind", ["ag", "rs"])
@pytest.mark.parametrize("stagger", [False, True])
def test_fused_ring_is_the_ring_of_flows(n: int, kind: str, stagger: bool) -> None:
    """Every rank's finish time equals the flow path's (eps = 0), ranks arriving together or
    at random times (up to three chunk times apart)."""
    router, gpus = _router(), np.array([0, 3, 5, 6, 1, 2, 7, 4])[:n]
    size = 64e6
    starts = (np.random.default_rng(n).uniform(0, 3 * size / n / 450e9, n) if stagger
              else np.zeros(n))
    ends = {}
    for fused in (False, True):
        env = simpy.Environment()
        net = FlowNetwork(env, router, record_timeline=False)
        make = ring_all_gather if kind == "ag" else ring_reduce_scatter
        ring = (FusedRing(env, ring_edges(router, gpus), gpus, size) if fused
                else make(net, gpus, size, start=False))
        for r in range(n):
            env.timeout(float(starts[r])).callbacks.append(_starter(ring, r))
        env.run()
        ends[fused] = np.array([float(e.value) for e in ring.rank_done])
    np.testing.assert_allclose(ends[True], ends[False], rtol=1e-12)


def test_fast_step_with_tp_rings_fused_is_the_step_with_flows() -> None:
    """A TP2 step in fast mode (the rings alone on NVLink: no PXN, CP or overlapped passes,
    stages on whole hosts): fused TP rings give the step and the breakdown of the flow path,
    with a fraction of the flows."""
    model = dataclasses.replace(get_model("mixtral-8x7b"), num_layers=2, moe_layers=(True,) * 2)
    fabric = FabricSpec(preset="rail-h800-64", params=(("hosts", 4), ("gpus_per_host", 8),
                                                      ("gpu", "H100")), multipath="dmodk")
    spec = StepSpec(model=model, layout=ParallelLayout(tp=2, ep=8, dp=8, pp=2), seq_len=1024,
                    fabric=fabric, microbatches=2)
    fused, flows = run_step(spec, Fast()), run_step(spec, Fast(fuse_tp=False))
    assert fused.step_time_s == pytest.approx(flows.step_time_s, rel=1e-9)
    for k, v in flows.breakdown_s.items():
        assert fused.breakdown_s[k] == pytest.approx(v, rel=1e-9, abs=1e-15)
    assert fused.engine["flows"] < flows.engine["flows"] / 4
