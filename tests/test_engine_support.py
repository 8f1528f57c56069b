"""Tiny fabrics and a runner shared by the engine tests (no tests here).

Graphs follow the topology schema: GPU nodes ``kind="gpu"`` with ``gpu=<index>``, switches
``kind="leaf"``/``"spine"``/..., and every link as two directed edges carrying ``bw_GBps``
(GB/s, one direction), ``latency_ns`` and ``tier``.
"""

from __future__ import annotations

from collections.abc import Sequence

import networkx as nx
import numpy as np
import simpy

from moesim.engine.fabric import fabric_from_graph
from moesim.engine.network import FlowNetwork
from moesim.engine.routing import Router, RouteSet

GB = 1e9


def add_link(
    g: nx.DiGraph, u: str, v: str, bw_GBps: float, latency_ns: float = 0.0, tier: str = "link"
) -> None:
    """A full-duplex link: two directed edges with the same attributes."""
    g.add_edge(u, v, bw_GBps=bw_GBps, latency_ns=latency_ns, tier=tier)
    g.add_edge(v, u, bw_GBps=bw_GBps, latency_ns=latency_ns, tier=tier)


def add_gpu(g: nx.DiGraph, index: int, **attrs: object) -> str:
    name = f"gpu{index}"
    g.add_node(name, kind="gpu", gpu=index, **attrs)
    return name


def add_switch(g: nx.DiGraph, name: str, kind: str = "leaf") -> str:
    g.add_node(name, kind=kind)
    return name


def leaf_spine(
    gpus_per_leaf: Sequence[int],
    spines: int,
    *,
    access_GBps: float,
    uplink_GBps: float | Sequence[float],
    access_ns: float = 100.0,
    uplink_ns: float = 300.0,
) -> nx.DiGraph:
    """Leaves ``leaf{i}`` holding ``gpus_per_leaf[i]`` GPUs each (numbered leaf-major), every
    leaf linked to every spine ``spine{j}``; ``uplink_GBps`` per (leaf, spine) in leaf-major
    order, or one value for all."""
    g = nx.DiGraph()
    ups = list(np.broadcast_to(np.asarray(uplink_GBps, dtype=float),
                               (len(gpus_per_leaf) * spines,)))
    gpu = 0
    for i, count in enumerate(gpus_per_leaf):
        leaf = add_switch(g, f"leaf{i}", "leaf")
        for _ in range(count):
            add_link(g, add_gpu(g, gpu), leaf, access_GBps, access_ns, "access")
            gpu += 1
        for j in range(spines):
            add_switch(g, f"spine{j}", "spine")
            add_link(g, leaf, f"spine{j}", ups[i * spines + j], uplink_ns, "uplink")
    return g


def run_flows(
    graph: nx.DiGraph,
    flows: Sequence[tuple[float, int, int, float]],
    *,
    mode: str = "ecmp",
    eps: float = 0.0,
    salt: int = 0,
    incremental: bool = True,
) -> FlowNetwork:
    """Run flows ``(start_s, src, dst, size_bytes)``, each in its own group, to the end."""
    env = simpy.Environment()
    net = FlowNetwork(env, Router(fabric_from_graph(graph), mode, salt), batch_window_rel=eps)
    net.rates.incremental = incremental

    def starter(at_s: float, src: int, dst: int, size: float) -> simpy.events.ProcessGenerator:
        yield env.timeout(at_s)
        yield net.transfer(src, dst, size)

    for at_s, src, dst, size in flows:
        env.process(starter(at_s, src, dst, size))
    env.run()
    return net


def padded(rs: RouteSet, pad: int) -> tuple[np.ndarray, np.ndarray]:
    """Routes as the solver takes them: hops x flows, padded with link index ``pad``."""
    lens = np.diff(rs.ptr)
    links = np.full((max(int(lens.max()), 1), lens.size), pad, dtype=np.int64)
    wts = np.zeros(links.shape)
    for f in range(lens.size):
        links[: lens[f], f] = rs.link[rs.ptr[f] : rs.ptr[f + 1]]
        wts[: lens[f], f] = rs.weight[rs.ptr[f] : rs.ptr[f + 1]]
    return links, wts


def route_of(net: FlowNetwork, flow: int) -> tuple[np.ndarray, np.ndarray]:
    """(links, weights) of one flow's route as the network stored it."""
    fl = net.flows.col
    return net.pairs.route(int(fl["pair_ptr"][flow]), int(fl["pair_len"][flow]))


def star(n_gpus: int, bw_GBps: float, latency_ns: float) -> nx.DiGraph:
    """n GPUs on one switch; every link ``bw_GBps`` GB/s per direction, ``latency_ns`` each."""
    g = nx.DiGraph()
    g.add_node("sw", kind="leaf")
    for i in range(n_gpus):
        g.add_node(f"gpu{i}", kind="gpu", gpu=i)
        for u, v in ((f"gpu{i}", "sw"), ("sw", f"gpu{i}")):
            g.add_edge(u, v, bw_GBps=bw_GBps, latency_ns=latency_ns, tier="access")
    return g
