"""Fast mode's host routers and all-to-all timers built ahead in a thread
(moesim.step.fast_routes) are the ones the run would build itself: same steps, same routes."""

from __future__ import annotations

import dataclasses
import threading

import numpy as np
import pytest

from moesim.fabric.build import build_table
from moesim.fabric.subfabric import GraphIndex
from moesim.model import get_model
from moesim.parallel.layout import ParallelLayout
from moesim.scenario.schema import FabricSpec
from moesim.step import StepSpec, fast_routes, run_step
from moesim.step.fast import representative_ranks
from moesim.step.fast_routes import HostRoutesAhead, host_router


def _fabric(multipath: str) -> FabricSpec:
    return FabricSpec(preset="rail-h800-64", params=(("hosts", 8), ("gpus_per_host", 4),
                                                     ("gpu", "H100"), ("oversubscription", 2.0)),
                      multipath=multipath, batch_window_rel=0.02)


def _spec(multipath: str = "dmodk", **layout: int) -> StepSpec:
    model = dataclasses.replace(get_model("mixtral-8x7b"), num_layers=4,
                                moe_layers=(True,) * 4)
    lay = ParallelLayout(**({"ep": 8, "dp": 16, "pp": 2} | layout))
    return StepSpec(model=model, layout=lay, seq_len=1024, fabric=_fabric(multipath),
                    microbatches=3)


def _step(spec: StepSpec) -> tuple[float, dict[str, float], str | None]:
    res = run_step(spec, mode="fast")
    return res.step_time_s, res.breakdown_s, res.top_link


class _Nothing(HostRoutesAhead):
    """Builds nothing: every router and timer made lazily by the run."""

    def __init__(self, *_: object) -> None:
        self.routes, self.timers = {}, {}


@pytest.mark.parametrize("multipath", ["dmodk", "ecmp", "spray"])
@pytest.mark.parametrize("layout", [{}, {"tp": 2, "dp": 8}, {"pp": 4, "dp": 8}])
def test_steps_equal_with_and_without_building_ahead(
        monkeypatch: pytest.MonkeyPatch, multipath: str, layout: dict[str, int]) -> None:
    spec = _spec(multipath, **layout)
    ahead = _step(spec)
    assert not [t.name for t in threading.enumerate() if t.name.startswith("moesim-")]
    monkeypatch.setattr("moesim.step.fast.HostRoutesAhead", _Nothing)
    assert _step(spec) == ahead


def test_built_ahead_as_the_run_builds_them() -> None:
    """Each host with one representative rank gets the router and ring pairs the lazy path
    gives (same sub-fabric, same routes); with TP 2 (two representative ranks per host) nothing
    is built for those hosts."""
    spec = _spec("ecmp")
    index = GraphIndex(build_table(spec.fabric), spec.fabric, spec.gpu)
    ranks = representative_ranks(spec.layout)
    index.router(ranks)
    ahead = HostRoutesAhead(index, spec, ranks)
    lay = spec.layout
    for rank in ranks:
        group = lay.group_of("ep", rank)
        got = ahead.route(index.host_of(rank))
        assert got is not None
        want = host_router(index, spec, lambda g: lay.coords(g)["pp"], group, rank)
        assert got[1] == want[1]
        src, dst = np.divmod(np.arange(64), 8)
        pairs = np.asarray(group)[src[src != dst]], np.asarray(group)[dst[src != dst]]
        a, b = got[0].routes(*pairs), want[0].routes(*pairs)
        for field in ("ptr", "link", "weight", "latency_s", "cap_Bps"):
            np.testing.assert_array_equal(getattr(a, field), getattr(b, field))
        timer = ahead.timer(group[0])
        assert timer is not None
        size = np.arange(64, dtype=float).reshape(8, 8) * 1e6
        offsets = np.linspace(0.0, 1e-4, 8)
        assert timer.time_s(size, offsets) == fast_routes.A2ATimer(
            want[0], np.asarray(group)).time_s(size, offsets)
    tp2 = _spec("ecmp", tp=2, dp=8)
    ranks2 = representative_ranks(tp2.layout)
    index2 = GraphIndex(build_table(tp2.fabric), tp2.fabric, tp2.gpu)
    index2.router(ranks2)
    assert HostRoutesAhead(index2, tp2, ranks2).routes == {}
