"""Weighted flows that stand for identical copies (moesim.engine.copies) against the copies
simulated one by one."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
import simpy

from moesim.collectives.alltoall import AllToAll
from moesim.engine.copies import CopiesRouter
from moesim.engine.network import FlowNetwork
from moesim.engine.pxn import PxnRouter
from moesim.engine.routing import Router
from moesim.fabric.build import build_graph, fabric_for
from moesim.fabric.spec import FabricSpec

GROUPS = np.array([np.r_[8 * k:8 * k + 8, 32 + 8 * k:40 + 8 * k] for k in range(4)])
"""Four EP16 groups on 16 hosts of 8 GPUs, SUs of 4 hosts: group k on hosts k and k + 4."""


def _router(over: float, multipath: str, pxn: bool = False) -> Router:
    spec = FabricSpec(preset="rail-h800-64", params=(("hosts", 16), ("hosts_per_su", 4),
                                                      ("oversubscription", over)))
    fabric = fabric_for(build_graph(spec), "H800", True)
    return (PxnRouter if pxn else Router)(fabric, multipath)


def _sender(a2a: AllToAll, rank: int) -> Callable[[simpy.Event], None]:
    def go(_: simpy.Event) -> None:
        a2a.send(rank)

    return go


def _finish(router: Router, groups: np.ndarray, size: np.ndarray, offsets: np.ndarray,
            eps: float) -> np.ndarray:
    """Per copy and receiver, when its last byte arrived (every copy its own flows)."""
    env = simpy.Environment()
    net = FlowNetwork(env, router, batch_window_rel=eps, record_timeline=False)
    a2as = [AllToAll(net, g, size, i) for i, g in enumerate(groups)]
    for a2a in a2as:
        for r in range(size.shape[0]):
            env.timeout(float(offsets[r])).callbacks.append(_sender(a2a, r))
    env.run()
    return np.array([net.groups.col["finish_s"][a.groups] for a in a2as])


def _matrix(n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    size = rng.gamma(2.0, 2e6, (n, n))
    np.fill_diagonal(size, 0.0)
    return size


@pytest.mark.parametrize("over", [1.0, 4.0])
@pytest.mark.parametrize("stagger", [False, True])
def test_symmetric_copies_as_weighted_flows_are_exact(over: float, stagger: bool) -> None:
    """Four EP16 groups (hosts k and k + 4: two SUs) of one byte matrix on a D-mod-K rail
    fabric: the copies are images of each other, so one weighted flow per pair gives every
    receiver's finish time of every copy (eps = 0)."""
    router = _router(over, "dmodk")
    groups = GROUPS
    size = _matrix(16, 0)
    offsets = np.random.default_rng(1).uniform(0, 3e-4, 16) if stagger else np.zeros(16)
    each = _finish(router, groups, size, offsets, 0.0)
    agg = _finish(CopiesRouter(router, groups), np.arange(16)[None, :], size, offsets, 0.0)
    np.testing.assert_allclose(each, np.broadcast_to(agg, each.shape), rtol=1e-9)


@pytest.mark.parametrize("multipath, pxn", [("ecmp", False), ("ecmp", True)])
def test_copies_without_symmetry_give_the_slowest_copy(multipath: str, pxn: bool) -> None:
    """ECMP hashes differ from copy to copy: the weighted flows hold every copy to the most
    loaded copy's rates, so the aggregate ends near the slowest copy (measured within 10 %),
    never before the fastest."""
    router = _router(4.0, multipath, pxn)
    groups = GROUPS
    size = _matrix(16, 2)
    each = _finish(router, groups, size, np.zeros(16), 0.0).max(axis=1)
    agg = _finish(CopiesRouter(router, groups), np.arange(16)[None, :], size, np.zeros(16),
                  0.0).max()
    assert each.min() * (1 - 1e-9) <= agg
    assert agg == pytest.approx(each.max(), rel=0.10)


def test_routes_merge_hops_and_map_ids() -> None:
    """A pair's route is the union of its copies' hops, weights summed; ids map to endpoints
    through ``endpoint_of``; an endpoint absent from a copy adds nothing."""
    router = _router(1.0, "dmodk")
    members = np.array([[0, 8, 16], [1, 9, -1]])
    cr = CopiesRouter(router, members, endpoint_of=np.array([2, 0, 1]))
    rs = cr.routes(np.array([1, 1]), np.array([2, 0]))  # endpoints (0, 1), (0, 2)
    one = router.routes(np.array([0, 1, 0]), np.array([8, 9, 16]))
    expect01 = np.concatenate([one.link[one.ptr[0]:one.ptr[1]], one.link[one.ptr[1]:one.ptr[2]]])
    links01 = rs.link[rs.ptr[0]:rs.ptr[1]]
    assert sorted(np.unique(expect01).tolist()) == sorted(links01.tolist())
    assert rs.weight[rs.ptr[0]:rs.ptr[1]].sum() == pytest.approx(expect01.size)
    np.testing.assert_array_equal(np.sort(rs.link[rs.ptr[1]:rs.ptr[2]]),
                                  np.sort(one.link[one.ptr[2]:one.ptr[3]]))
