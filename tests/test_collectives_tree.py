"""Pipelined binary-tree all-reduce: exact times on a one-switch star, and its pipelining."""

from __future__ import annotations

from typing import cast

import networkx as nx
import pytest
import simpy
from collective_registry import make_collective
from collective_tree import tree_all_reduce

from moesim.collectives.ring import ring_all_reduce
from moesim.engine.fabric import fabric_from_graph
from moesim.engine.network import FlowNetwork
from moesim.engine.routing import Router
from moesim.errors import ConfigError

GB = 1e9
BW, LAT = 40.0, 500.0  # GB/s per direction, ns per link


def network(n: int) -> FlowNetwork:
    g = nx.DiGraph()
    g.add_node("sw", kind="leaf")
    for i in range(n):
        g.add_node(f"gpu{i}", kind="gpu", gpu=i)
        for u, v in ((f"gpu{i}", "sw"), ("sw", f"gpu{i}")):
            g.add_edge(u, v, bw_GBps=BW, latency_ns=LAT, tier="access")
    return FlowNetwork(simpy.Environment(), Router(fabric_from_graph(g), "ecmp"))


def at(event: simpy.Event) -> float:
    assert event.triggered
    return cast(float, event.value)


def hop_s(size_bytes: float, share: int = 1) -> float:
    """One chunk over GPU->switch->GPU with ``share`` flows on the busiest link."""
    return share * size_bytes / (BW * GB) + 2 * LAT * 1e-9


@pytest.mark.parametrize("k", [1, 4, 16])
def test_two_ranks_pipeline_up_then_down(k: int) -> None:
    size = 64e6
    net = network(2)
    tree = tree_all_reduce(net, [0, 1], size, n_chunks=k)
    net.env.run()
    # k chunks go up back to back; each comes down as soon as the root has it: k + 1 hops
    assert at(tree.done) == pytest.approx((k + 1) * hop_s(size / k), rel=1e-9)
    assert at(tree.rank_done[0]) == pytest.approx(k * hop_s(size / k), rel=1e-9)


def test_three_ranks_share_the_roots_links() -> None:
    size, k = 30e6, 6
    net = network(3)
    tree = tree_all_reduce(net, [0, 1, 2], size, n_chunks=k)
    net.env.run()
    # both leaves send into the root's downlink, the root sends to both on its uplink
    assert at(tree.done) == pytest.approx((k + 1) * hop_s(size / k, share=2), rel=1e-9)


def test_reduction_time_on_two_ranks() -> None:
    size, k, red = 8e6, 4, 1e-5
    net = network(2)
    tree = tree_all_reduce(net, [0, 1], size, n_chunks=k, reduce_s=red)
    net.env.run()
    assert red < hop_s(size / k)  # the reducer keeps up, so it adds only once
    assert at(tree.done) == pytest.approx((k + 1) * hop_s(size / k) + red, rel=1e-9)


def test_deeper_tree_finishes_and_moves_the_right_bytes() -> None:
    n, size, k = 7, 7e6, 4
    net = network(n)
    tree = tree_all_reduce(net, range(n), size, n_chunks=k)
    net.env.run()
    # every non-root sends the buffer up once and receives it once
    assert net.flows.col["size_bytes"][: net.flows.n].sum() == pytest.approx(2 * (n - 1) * size)
    depth = 2
    assert at(tree.done) >= 2 * depth * hop_s(size / k) + (k - 1) * hop_s(size / k)
    assert all(e.triggered for e in tree.rank_done)


def test_late_root_delays_everyone() -> None:
    net = network(3)
    tree = tree_all_reduce(net, [0, 1, 2], 6e6, n_chunks=2, start=False)
    tree.start_rank(1)
    tree.start_rank(2)
    net.env.timeout(1.0).callbacks.append(lambda _: tree.start_rank(0))
    net.env.run()
    assert at(tree.done) > 1.0
    assert at(tree.rank_done[0]) == pytest.approx(1.0)  # children's chunks were waiting


def test_tree_vs_ring_latency_bound() -> None:
    """Tiny messages on many ranks: the tree's log-depth beats the ring's 2(n-1) hops."""
    n, size = 16, 16e3
    net = network(n)
    tree = tree_all_reduce(net, range(n), size, n_chunks=1)
    net.env.run()
    net = network(n)
    ring = ring_all_reduce(net, range(n), size)
    net.env.run()
    assert at(tree.done) < at(ring.done)


def test_registry_and_errors() -> None:
    net = network(2)
    coll = make_collective("tree", net, [0, 1], 8e6, "all_reduce").start()
    net.env.run()
    assert at(coll.done) == pytest.approx(9 * hop_s(1e6), rel=1e-9)  # default 8 chunks
    with pytest.raises(ConfigError, match="allowed: all_reduce"):
        make_collective("tree", net, [0, 1], 1.0, "all_gather")
    with pytest.raises(ConfigError, match="n_chunks"):
        tree_all_reduce(net, [0, 1], 1.0, n_chunks=0)
    assert at(tree_all_reduce(network(1), [0], 5.0).done) == 0.0  # one rank: done at once
