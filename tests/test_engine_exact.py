"""Exact, hand-computed flow times and rates of the network engine."""

from __future__ import annotations

import networkx as nx
import numpy as np
import pytest
import simpy
from test_engine_support import (
    GB,
    add_gpu,
    add_link,
    add_switch,
    leaf_spine,
    padded,
    route_of,
    run_flows,
)

from moesim.engine.fabric import fabric_from_graph, implied_links
from moesim.engine.maxmin import max_min_rates
from moesim.engine.network import FlowNetwork
from moesim.engine.routing import Router
from moesim.errors import ConfigError, FabricError

EXACT = 1e-12


def one_link(bw_GBps: float, latency_ns: float) -> nx.DiGraph:
    g = nx.DiGraph()
    add_link(g, add_gpu(g, 0), add_gpu(g, 1), bw_GBps, latency_ns)
    return g


# ------------------------------------------------------------------ one link
def test_one_flow_is_latency_plus_size_over_bandwidth() -> None:
    env = simpy.Environment()
    net = FlowNetwork(env, Router(fabric_from_graph(one_link(50.0, 1000.0))))
    done = net.transfer(0, 1, 1e6)
    env.run(done)
    expected = 1000e-9 + 1e6 / (50.0 * GB)
    assert env.now == pytest.approx(expected, rel=EXACT)
    assert net.flows["finish_s"][0] == pytest.approx(expected, rel=EXACT)
    assert net.flows["drain_s"][0] == pytest.approx(1e6 / (50.0 * GB), rel=EXACT)
    assert net.flows["rate_Bps"][0] == 50.0 * GB
    assert net.solves == 0  # a flow alone is timed in closed form (moesim.engine.solo)


def test_two_equal_flows_share_a_link_and_finish_together() -> None:
    s, bw = 3e6, 25.0
    net = run_flows(one_link(bw, 500.0), [(0.0, 0, 1, s), (0.0, 0, 1, s)])
    assert net.flows["rate_Bps"].tolist() == [bw * GB / 2, bw * GB / 2]
    assert net.flows["finish_s"] == pytest.approx([2 * s / (bw * GB) + 500e-9] * 2, rel=EXACT)


def test_two_unequal_flows_processor_sharing() -> None:
    s1, s2, bw, lat = 1e6, 4e6, 10.0, 2000.0
    net = run_flows(one_link(bw, lat), [(0.0, 0, 1, s1), (0.0, 0, 1, s2)])
    b = bw * GB
    assert net.flows["finish_s"][0] == pytest.approx(2 * s1 / b + lat * 1e-9, rel=EXACT)
    assert net.flows["finish_s"][1] == pytest.approx((s1 + s2) / b + lat * 1e-9, rel=EXACT)
    assert net.solves == 2
    assert net.stats.bytes[0] == pytest.approx(s1 + s2, rel=EXACT)
    assert net.stats.busy_s[0] == pytest.approx((s1 + s2) / b, rel=EXACT)
    assert net.stats.peak_flows[0] == 2
    assert net.stats.bytes[1] == 0.0


# ------------------------------------------------------- three-link max-min
def three_link_chain() -> nx.DiGraph:
    """Switches X - Y - Z - W; core links 10, 25, 40 GB/s; GPU access links 1000 GB/s.

    A: gpu0@X -> gpu2@Z crosses l1 = X->Y, l2 = Y->Z
    B: gpu1@Y -> gpu4@W crosses l2, l3 = Z->W
    C: gpu3@Z -> gpu5@W crosses l3
    """
    g = nx.DiGraph()
    for name in "XYZW":
        add_switch(g, name)
    for a, b, bw in (("X", "Y", 10.0), ("Y", "Z", 25.0), ("Z", "W", 40.0)):
        add_link(g, a, b, bw, 500.0, "core")
    for gpu, sw in enumerate("XYZZWW"):
        add_link(g, add_gpu(g, gpu), sw, 1000.0, 100.0, "access")
    return g


def test_three_link_water_filling_levels() -> None:
    # l1 alone: A at 10. Then l2 has 25 - 10 = 15 left for B alone (level 15) while l3 is at
    # 40 / 2 = 20: B = 15. C takes the rest of l3: 40 - 15 = 25. Three levels, three passes.
    links = np.array([[0, 1, 2], [1, 2, 3]])
    wts = np.array([[1.0, 1.0, 1.0], [1.0, 1.0, 0.0]])
    alloc = max_min_rates(links, wts, np.array([10.0, 25.0, 40.0]))
    assert alloc.rate_Bps.tolist() == [10.0, 15.0, 25.0]
    assert alloc.bottleneck_link.tolist() == [0, 1, 2]
    assert alloc.passes == 3


def test_three_link_finish_times_in_the_network() -> None:
    # t in [0, 0.1]: A 10, B 15, C 25. A (1 GB) drains at 0.1; B sent 1.5, C 2.5.
    # t in [0.1, 0.2]: l2 = 25 for B alone, l3 = 40 / 2 = 20 is lower: B = C = 20.
    #   B (3.5 GB) has 2.0 left -> drains at 0.2; C sent 2.5 + 2.0 = 4.5.
    # t > 0.2: C alone on l3 at 40: 6.5 - 4.5 = 2.0 left -> drains at 0.25.
    net = run_flows(three_link_chain(), [(0.0, 0, 2, 1 * GB), (0.0, 1, 4, 3.5 * GB),
                                         (0.0, 3, 5, 6.5 * GB)])
    lat = np.array([1200e-9, 1200e-9, 700e-9])  # access + core (+ core) + access
    assert net.flows["drain_s"] == pytest.approx([0.1, 0.2, 0.25], rel=EXACT)
    assert net.flows["finish_s"] == pytest.approx(np.array([0.1, 0.2, 0.25]) + lat, rel=EXACT)
    fab = net.fabric
    l1, l2, l3 = fab.link_id("X", "Y"), fab.link_id("Y", "Z"), fab.link_id("Z", "W")
    assert net.stats.bytes[[l1, l2, l3]] == pytest.approx([1 * GB, 4.5 * GB, 10 * GB], rel=EXACT)
    assert net.stats.peak_util[[l1, l2, l3]] == pytest.approx([1.0, 1.0, 1.0], rel=EXACT)


# ---------------------------------------------------------- multipath modes
def two_leaves_two_spines() -> nx.DiGraph:
    """gpu0, gpu1 on leaf0; gpu2, gpu3 on leaf1; 100 GB/s access, 25 GB/s per uplink."""
    return leaf_spine([2, 2], 2, access_GBps=100.0, uplink_GBps=25.0)


def uplink(router: Router, src: int, dst: int) -> int:
    rs = router.routes(np.array([src]), np.array([dst]))
    return int(rs.link[1])  # gpu -> leaf, leaf -> spine, ...


def test_ecmp_collision_takes_twice_as_long_as_spray_and_dmodk() -> None:
    g = two_leaves_two_spines()
    fab = fabric_from_graph(g)
    collide = [s for s in range(64) if uplink(Router(fab, "ecmp", s), 0, 2)
               == uplink(Router(fab, "ecmp", s), 1, 3)]
    apart = sorted(set(range(64)) - set(collide))
    assert collide and apart, "the hash should sometimes collide and sometimes not"
    size, up_bps, lat = 1e8, 25.0 * GB, 800e-9  # 100 + 300 + 300 + 100 ns
    flows = [(0.0, 0, 2, size), (0.0, 1, 3, size)]
    hit = run_flows(g, flows, mode="ecmp", salt=collide[0])
    assert hit.flows["finish_s"] == pytest.approx([2 * size / up_bps + lat] * 2, rel=EXACT)
    for net in (run_flows(g, flows, mode="ecmp", salt=apart[0]),
                run_flows(g, flows, mode="spray"), run_flows(g, flows, mode="dmodk")):
        assert net.flows["finish_s"] == pytest.approx([size / up_bps + lat] * 2, rel=EXACT)


def test_dmodk_spreads_destinations_over_spines_and_spray_halves() -> None:
    fab = fabric_from_graph(two_leaves_two_spines())
    dmodk = Router(fab, "dmodk")
    assert uplink(dmodk, 0, 2) != uplink(dmodk, 0, 3)
    assert uplink(dmodk, 0, 2) == uplink(dmodk, 1, 2)  # destination-based
    rs = Router(fab, "spray").routes(np.array([0]), np.array([2]))
    assert sorted(rs.weight.tolist()) == [0.5, 0.5, 0.5, 0.5, 1.0, 1.0]
    assert rs.cap_Bps[0] == 50.0 * GB  # two 25 GB/s paths
    assert rs.latency_s[0] == pytest.approx(800e-9, rel=EXACT)


# ------------------------------------------------------------------ batching
def test_starts_at_one_instant_from_many_processes_share_one_solve() -> None:
    # Three flows into gpu3 over its 10 GB/s access link, started by three processes at t=0
    # (one after a zero-delay timeout, i.e. a later event of the same instant).
    g = nx.DiGraph()
    add_switch(g, "sw")
    for i in range(4):
        add_link(g, add_gpu(g, i), "sw", 10.0 if i == 3 else 100.0)
    env = simpy.Environment()
    net = FlowNetwork(env, Router(fabric_from_graph(g)))
    s, b = 1e6, 10.0 * GB

    def proc(src: int, size: float, wait: bool) -> simpy.events.ProcessGenerator:
        if wait:
            yield env.timeout(0.0)
        yield net.transfer(src, 3, size)

    for src, size, wait in ((0, s, False), (1, 2 * s, True), (2, 3 * s, False)):
        env.process(proc(src, size, wait))
    env.run(until=1e-9)
    assert net.solves == 1 and net.active.n == 3
    assert net.flows["rate_Bps"] == pytest.approx([b / 3] * 3, rel=EXACT)
    env.run()
    # b/3 each until 3s/b; then b/2 each until 5s/b; then b alone until 6s/b.
    assert net.flows["src"].tolist() == [0, 2, 1]  # the waiting process started last
    drain = net.flows["drain_s"][np.argsort(net.flows["size_bytes"])]
    assert drain == pytest.approx([3 * s / b, 5 * s / b, 6 * s / b], rel=EXACT)
    assert net.solves == 3


# ------------------------------------------------------------- implied links
def hgx_like(pcie_GBps: float, nic_GBps: float) -> nx.DiGraph:
    """2 hosts x 2 GPUs: NVSwitch per host, gpu - pcie - nic - rail leaf, leaves - spine."""
    g = nx.DiGraph()
    add_switch(g, "spine", "spine")
    for rail in range(2):
        add_link(g, add_switch(g, f"leaf{rail}"), "spine", 2 * nic_GBps, 450.0, "leaf_spine")
    for host in range(2):
        nvsw = add_switch(g, f"h{host}/nvsw", "nvswitch")
        for rail in range(2):
            gpu = add_gpu(g, 2 * host + rail, host=host)
            nic = f"h{host}/nic{rail}"
            g.add_node(nic, kind="nic")
            add_link(g, gpu, nvsw, 450.0, 1665.0, "nvlink")
            add_link(g, gpu, nic, pcie_GBps, 1000.0, "pcie")
            add_link(g, nic, f"leaf{rail}", nic_GBps, 400.0, "nic")
    return g


@pytest.mark.parametrize(("pcie", "nic", "implied_tier"), [(64.0, 50.0, "pcie"),
                                                           (32.0, 50.0, "nic")])
def test_implied_links_are_the_wider_side_of_a_nic(pcie: float, nic: float,
                                                   implied_tier: str) -> None:
    fab = fabric_from_graph(hgx_like(pcie, nic))
    mask = implied_links(fab)
    # The spine and the NVSwitches have two neighbours here, so they are relays too: equal
    # capacities, the link into the relay is kept.
    from_relay = np.isin(fab.node_kind[fab.link_src], ["spine", "nvswitch"])
    assert mask.tolist() == ((fab.tier == implied_tier) | from_relay).tolist()
    rng = np.random.default_rng(7)
    src = rng.integers(0, 4, 40)
    dst = (src + rng.integers(1, 4, 40)) % 4
    for mode in ("ecmp", "spray"):
        links, wts = padded(Router(fab, mode).routes(src, dst), fab.n_links)
        full = max_min_rates(links, wts, fab.cap_Bps)
        pruned_links = np.where(np.append(mask, False)[links], fab.n_links, links)
        pruned = max_min_rates(pruned_links, np.where(pruned_links == fab.n_links, 0.0, wts),
                               fab.cap_Bps)
        assert pruned.rate_Bps == pytest.approx(full.rate_Bps, rel=EXACT)


def test_route_through_the_nic_and_stats_count_pruned_links() -> None:
    g = hgx_like(64.0, 50.0)
    net = run_flows(g, [(0.0, 0, 3, 5e7)])  # host 0 gpu 0 -> host 1 gpu 1: cross rail
    links, _ = route_of(net, 0)
    names = [net.fabric.link_name(int(lk)) for lk in links]
    assert names == ["gpu0->h0/nic0", "h0/nic0->leaf0", "leaf0->spine", "spine->leaf1",
                     "leaf1->h1/nic1", "h1/nic1->gpu3"]
    assert net.stats.bytes[links] == pytest.approx([5e7] * 6, rel=EXACT)
    lat = (1000 + 400 + 450 + 450 + 400 + 1000) * 1e-9
    assert net.flows["finish_s"][0] == pytest.approx(5e7 / (50.0 * GB) + lat, rel=EXACT)
    same_host = run_flows(g, [(0.0, 0, 1, 9e8)])  # over NVLink
    assert same_host.flows["finish_s"][0] == pytest.approx(9e8 / (450 * GB) + 3330e-9, rel=EXACT)


# ------------------------------------------------------------------ errors
def test_router_rejects_bad_mode_and_gpus_and_disconnected_pairs() -> None:
    g = two_leaves_two_spines()
    add_gpu(g, 4)  # an island
    fab = fabric_from_graph(g)
    with pytest.raises(ConfigError, match="allowed: ecmp, dmodk, spray"):
        Router(fab, "zip")
    for mode in ("ecmp", "dmodk", "spray"):
        router = Router(fab, mode)
        with pytest.raises(FabricError, match="outside"):
            router.routes(np.array([0]), np.array([9]))
        with pytest.raises(FabricError, match="no route"):
            router.routes(np.array([0]), np.array([4]))
        assert router.routes(np.array([], dtype=int), np.array([], dtype=int)).ptr.tolist() == [0]


def test_routes_are_cached_per_pair_and_independent_of_request_order() -> None:
    fab = fabric_from_graph(leaf_spine([2, 3, 2], 3, access_GBps=100.0, uplink_GBps=25.0))
    src, dst = np.nonzero(~np.eye(7, dtype=bool))
    for mode in ("ecmp", "dmodk", "spray"):
        together = Router(fab, mode, 3).routes(src, dst)
        router = Router(fab, mode, 3)
        for i in np.random.default_rng(0).permutation(src.size):
            one = router.routes(src[i : i + 1], dst[i : i + 1])
            lo, hi = together.ptr[i], together.ptr[i + 1]
            assert one.link.tolist() == together.link[lo:hi].tolist()
            assert one.weight.tolist() == together.weight[lo:hi].tolist()
