"""PXN routing: cross-rail traffic hops over NVLink to the rail-matched GPU, then its rail."""

from __future__ import annotations

import numpy as np

from moesim import topologies
from moesim.engine.fabric import fabric_from_graph
from moesim.engine.pxn import PxnRouter
from moesim.engine.routing import Router


def _names(fabric, rs, i):  # type: ignore[no-untyped-def]
    return [fabric.link_name(int(k)) for k in rs.link[rs.ptr[i] : rs.ptr[i + 1]]]


def test_cross_rail_pair_uses_nvlink_then_the_destination_rail() -> None:
    fab = fabric_from_graph(topologies.rail_fat_tree(2, gpu="H100", hosts_per_su=2))
    rs = PxnRouter(fab, "ecmp").routes(np.array([0, 0, 1]), np.array([11, 8, 2]))
    cross = _names(fab, rs, 0)  # h0/gpu0 -> h1/gpu3: via h0/gpu3 and rail 3
    assert cross[:2] == ["h0/gpu0->h0/nvsw", "h0/nvsw->h0/gpu3"]
    assert not any("spine" in n for n in cross) and any("leaf.r3" in n for n in cross)
    same_rail = _names(fab, rs, 1)  # h0/gpu0 -> h1/gpu0: unchanged, rail 0
    assert same_rail == _names(fab, Router(fab, "ecmp").routes(np.array([0]), np.array([8])), 0)
    in_host = _names(fab, rs, 2)
    assert in_host == ["h0/gpu1->h0/nvsw", "h0/nvsw->h0/gpu2"]
    plain = Router(fab, "ecmp").routes(np.array([0]), np.array([11]))
    assert any("spine" in n for n in _names(fab, plain, 0))
    assert rs.latency_s[0] > 0 and rs.cap_Bps[0] > 0


def test_multi_plane_cross_plane_traffic_needs_pxn() -> None:
    fab = fabric_from_graph(topologies.multi_plane_fat_tree(2, planes=8, hosts_per_leaf=2))
    rs = PxnRouter(fab, "ecmp").routes(np.array([0]), np.array([11]))
    names = _names(fab, rs, 0)
    assert names[1] == "h0/nvsw->h0/gpu3" and names[-1].endswith("h1/gpu3")
