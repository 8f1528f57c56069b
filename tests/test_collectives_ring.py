"""Ring collectives as flows: exact times on an idealised star (one switch), contention, overlap."""

from __future__ import annotations

from collections.abc import Callable
from typing import cast

import networkx as nx
import numpy as np
import pytest
import simpy
from hypothesis import given, settings
from hypothesis import strategies as st
from test_engine_support import star

from moesim.collectives.ring import (
    RingCollective,
    ring_all_gather,
    ring_all_reduce,
    ring_reduce_scatter,
)
from moesim.engine.fabric import fabric_from_graph
from moesim.engine.network import FlowNetwork
from moesim.engine.routing import Router
from moesim.errors import ConfigError

GB = 1e9



def network(graph: nx.DiGraph) -> FlowNetwork:
    return FlowNetwork(simpy.Environment(), Router(fabric_from_graph(graph), "ecmp"))


def step_s(size_bytes: float, n: int, bw_GBps: float, latency_ns: float, share: int = 1) -> float:
    """One uncongested ring step: a chunk over a GPU->switch->GPU path (2 link latencies)."""
    return share * size_bytes / n / (bw_GBps * GB) + 2 * latency_ns * 1e-9


def at(event: simpy.Event) -> float:
    """The time an event fired with (ring and p2p events carry their finish time)."""
    assert event.triggered
    return cast(float, event.value)


def run(net: FlowNetwork, ring: RingCollective) -> float:
    net.env.run()
    return at(ring.done)


@pytest.mark.parametrize("n", [2, 4, 8])
def test_all_reduce_time_on_ideal_ring(n: int) -> None:
    size, bw, lat = 64e6, 50.0, 500.0
    net = network(star(n, bw, lat))
    ring = ring_all_reduce(net, list(range(n)), size)
    expected = 2 * (n - 1) / n * size / (bw * GB) + 2 * (n - 1) * 2 * lat * 1e-9
    assert run(net, ring) == pytest.approx(expected, rel=1e-9)
    assert [e.value for e in ring.rank_done] == pytest.approx([expected] * n, rel=1e-9)
    assert net.flows.col["size_bytes"][: net.flows.n].sum() == pytest.approx(2 * (n - 1) * size)


@pytest.mark.parametrize("make", [ring_reduce_scatter, ring_all_gather])
def test_half_collectives_take_half(make: Callable[..., RingCollective]) -> None:
    n, size, bw, lat = 4, 32e6, 25.0, 1000.0
    net = network(star(n, bw, lat))
    ring = make(net, [0, 1, 2, 3], size)
    assert run(net, ring) == pytest.approx((n - 1) * step_s(size, n, bw, lat), rel=1e-9)


def test_reduction_time_adds_per_reduce_step() -> None:
    n, size, bw, lat, red = 4, 8e6, 100.0, 200.0, 3e-5
    net = network(star(n, bw, lat))
    rs = ring_reduce_scatter(net, range(n), size, reduce_s=red)
    assert run(net, rs) == pytest.approx((n - 1) * (step_s(size, n, bw, lat) + red), rel=1e-9)
    net = network(star(n, bw, lat))
    seen: list[float] = []

    def per_chunk(chunk_bytes: float) -> float:
        seen.append(chunk_bytes)
        return chunk_bytes / 1e12  # memory-bound: bytes / (1 TB/s)

    ar = ring_all_reduce(net, range(n), size, reduce_s=per_chunk)
    red = size / n / 1e12
    expected = 2 * (n - 1) * step_s(size, n, bw, lat) + (n - 1) * red  # only RS steps reduce
    assert run(net, ar) == pytest.approx(expected, rel=1e-9)
    assert seen == [size / n] * (n * (n - 1))


def test_disjoint_rings_do_not_slow_each_other() -> None:
    size, bw, lat = 16e6, 50.0, 300.0
    alone_net = network(star(8, bw, lat))
    alone = run(alone_net, ring_all_reduce(alone_net, [0, 1, 2, 3], size))
    net = network(star(8, bw, lat))
    a = ring_all_reduce(net, [0, 1, 2, 3], size)
    b = ring_all_reduce(net, [4, 5, 6, 7], size)
    net.env.run()
    assert at(a.done) == pytest.approx(alone, rel=1e-9)
    assert at(b.done) == pytest.approx(alone, rel=1e-9)


def test_rings_sharing_links_split_bandwidth() -> None:
    n, size, bw, lat = 4, 16e6, 50.0, 300.0
    net = network(star(n, bw, lat))
    a = ring_all_reduce(net, [0, 1, 2, 3], size)
    b = ring_all_reduce(net, [0, 3, 2, 1], size)  # every link carries one flow of each
    net.env.run()
    expected = 2 * (n - 1) * step_s(size, n, bw, lat, share=2)
    assert at(a.done) == pytest.approx(expected, rel=1e-9)
    assert at(b.done) == pytest.approx(expected, rel=1e-9)


def test_partially_shared_rings_take_longer() -> None:
    size, bw, lat = 16e6, 50.0, 300.0
    net = network(star(6, bw, lat))
    alone = run(net, ring_all_reduce(net, [0, 1, 2, 3], size))
    net = network(star(6, bw, lat))
    a = ring_all_reduce(net, [0, 1, 2, 3], size)
    b = ring_all_reduce(net, [1, 4, 5, 2], size)  # shares GPU 1's and GPU 2's links
    net.env.run()
    assert at(a.done) > alone * 1.05
    assert at(b.done) > alone * 1.05


def test_late_rank_delays_only_its_dependents() -> None:
    """All-gather on 3 ranks with rank 0 late by d: per-rank dependency, no global barrier."""
    size, bw, lat, d = 3e6, 10.0, 100.0, 1.0
    net = network(star(3, bw, lat))
    env = net.env
    ring = ring_all_gather(net, [0, 1, 2], size, start=False)
    ring.start_rank(1)
    ring.start_rank(2)
    env.timeout(d).callbacks.append(lambda _: ring.start_rank(0))
    env.run()
    chunk_s, hop_s = size / 3 / (bw * GB), 2 * lat * 1e-9
    # rank 0 got both chunks long before d; at d it sends step 0, then step 1 as soon as step
    # 0 has drained (in order, one on the wire at a time, as NCCL's FIFO of steps). Rank 1
    # forwards rank 0's chunk to rank 2 as soon as it lands.
    assert [e.value for e in ring.rank_done] == pytest.approx(
        [d, d + 2 * chunk_s + hop_s, d + 2 * chunk_s + 2 * hop_s], rel=1e-9)
    assert ring.done.value == pytest.approx(d + 2 * chunk_s + 2 * hop_s, rel=1e-9)


def test_late_rank_backlog_goes_in_order() -> None:
    """A rank that joins late with its whole backlog ready keeps one chunk on the wire: on a
    ring of 4 its n - 1 = 3 chunks go back to back (path latency once), and each successor
    forwards what it needs one hop later, not after the whole backlog at a shared rate."""
    size, bw, lat, d = 4e6, 10.0, 100.0, 1.0
    net = network(star(4, bw, lat))
    ring = ring_all_gather(net, [0, 1, 2, 3], size, start=False)
    for r in (1, 2, 3):
        ring.start_rank(r)
    net.env.timeout(d).callbacks.append(lambda _: ring.start_rank(0))
    net.env.run()
    chunk_s, hop_s = size / 4 / (bw * GB), 2 * lat * 1e-9
    assert [e.value for e in ring.rank_done] == pytest.approx(
        [d + i * hop_s + (3 * chunk_s if i else 0.0) for i in range(4)], rel=1e-9)


def test_single_rank_and_zero_bytes_finish_at_start() -> None:
    net = network(star(2, 10.0, 100.0))
    assert run(net, ring_all_reduce(net, [1], 1e6)) == 0.0
    net = network(star(2, 10.0, 100.0))
    assert run(net, ring_all_reduce(net, [0, 1], 0.0)) == 0.0


def test_bad_input_and_double_start() -> None:
    net = network(star(2, 10.0, 100.0))
    with pytest.raises(ConfigError, match="size_bytes"):
        ring_all_reduce(net, [0, 1], -1.0)
    with pytest.raises(ConfigError, match="gpus"):
        ring_all_reduce(net, [], 1.0)
    with pytest.raises(ConfigError, match="reduce_s"):
        ring_reduce_scatter(net, [0, 1], 1.0, reduce_s=-1.0)
    ring = ring_all_gather(net, [0, 1], 1.0)
    with pytest.raises(ConfigError, match="already started"):
        ring.start_rank(0)


def dp_backward(
    n_layers: int, compute_s: float, bucket_bytes: float, n: int, bw: float, lat: float
) -> tuple[list[float], list[float]]:
    """K backward layers; each layer's gradient bucket is reduce-scattered right after it."""
    net = network(star(n, bw, lat))
    env = net.env
    compute_end: list[float] = []
    rings: list[RingCollective] = []

    def backward() -> simpy.events.ProcessGenerator:
        for _ in range(n_layers):
            yield env.timeout(compute_s)
            compute_end.append(env.now)
            rings.append(ring_reduce_scatter(net, range(n), bucket_bytes))

    env.process(backward())
    env.run()
    return compute_end, [at(r.done) for r in rings]


def test_dp_reduce_scatter_overlapped_with_backward() -> None:
    n, bw, lat, bucket = 8, 50.0, 1000.0, 80e6
    ring_s = (n - 1) * step_s(bucket, n, bw, lat)  # 1.407 ms
    compute_end, finish = dp_backward(4, 2e-3, bucket, n, bw, lat)  # compute > ring: no overlap
    assert finish == pytest.approx([t + ring_s for t in compute_end], rel=1e-9)
    assert finish[-1] == pytest.approx(4 * 2e-3 + ring_s, rel=1e-9)
    # compute shorter than a bucket's ring time: buckets queue on the fabric and end later
    compute_end, finish = dp_backward(4, 0.5e-3, bucket, n, bw, lat)
    assert finish[-1] > compute_end[-1] + ring_s * 1.05
    # each GPU uplink must carry 4 buckets x (n-1) chunks after the first compute ends
    assert finish[-1] >= compute_end[0] + 4 * (n - 1) * bucket / n / (bw * GB)


@settings(max_examples=15, deadline=None)
@given(
    n=st.integers(2, 9),
    size=st.floats(1e3, 1e9),
    bw=st.floats(1.0, 900.0),
    lat=st.floats(0.0, 5000.0),
)
def test_all_reduce_formula_property(n: int, size: float, bw: float, lat: float) -> None:
    net = network(star(n, bw, lat))
    ring = ring_all_reduce(net, np.arange(n), size)
    assert run(net, ring) == pytest.approx(2 * (n - 1) * step_s(size, n, bw, lat), rel=1e-9)
