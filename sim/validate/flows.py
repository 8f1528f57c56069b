"""Run one batch of flows on a fabric graph and time it: the engine harness of the cases.

Every validation case that measures a collective builds a fabric, starts all its flows at
t = 0 in one :class:`~moesim.engine.network.FlowNetwork` (exact fluid max-min, no finish
batching) and reads the time the last byte arrives.

*Loopback endpoints.* Some kernels move a rank's share for itself through the same
per-GPU copy path as its remote shares (see :mod:`moesim.validate.deepep`). The engine
completes a flow to itself at once, so :func:`with_loopbacks` gives every GPU ``g`` a
second endpoint ``g + N`` hung off the same NVSwitch: a flow ``g -> g + N`` crosses ``g``'s
own NVLink uplink, and so is charged to the same port budget as ``g``'s remote sends.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import simpy

from moesim.calibration import link_achievable_fraction
from moesim.engine.fabric import Fabric, fabric_from_graph
from moesim.engine.network import FlowNetwork
from moesim.engine.pxn import PxnRouter
from moesim.engine.routing import Router

if TYPE_CHECKING:
    import networkx as nx

LOOPBACK_TIER = "loopback"


@dataclass(frozen=True)
class FlowBatch:
    """Flows to start together: GPU indices and sizes (bytes)."""

    src: np.ndarray
    dst: np.ndarray
    size_bytes: np.ndarray

    @staticmethod
    def concat(*batches: FlowBatch) -> FlowBatch:
        return FlowBatch(*(np.concatenate([getattr(b, f) for b in batches])
                           for f in ("src", "dst", "size_bytes")))


@dataclass(frozen=True)
class FlowRun:
    """What one batch did: completion time and bytes per link."""

    time_s: float
    fabric: Fabric
    link_bytes: np.ndarray

    def tier_bytes(self, tier: str) -> np.ndarray:
        """Bytes carried by each link of ``tier`` (in link order)."""
        return self.link_bytes[self.fabric.tier == tier]


def with_loopbacks(graph: nx.DiGraph) -> nx.DiGraph:
    """A copy of an HGX-style ``graph`` where GPU g also has endpoint g + N (see module doc)."""
    out = graph.copy()
    gpus = [(n, d) for n, d in graph.nodes(data=True) if d.get("kind") == "gpu"]
    n_gpus = len(gpus)
    for name, data in gpus:
        switch = next(v for v in graph.successors(name)
                      if graph.nodes[v].get("kind") == "nvswitch")
        loop = f"{name}/loop"
        out.add_node(loop, **{**data, "gpu": int(data["gpu"]) + n_gpus})
        bw = float(graph.edges[name, switch]["bw_GBps"])
        for u, v in ((loop, switch), (switch, loop)):
            out.add_edge(u, v, bw_GBps=bw * 1e3, latency_ns=0.0, tier=LOOPBACK_TIER)
    return out


def derated_fabric(graph: nx.DiGraph) -> Fabric:
    """Index ``graph`` with every tier at its calibrated achievable fraction."""
    medium = str(graph.graph.get("fabric", "ib"))
    gpu = str(graph.graph.get("gpu", "H100"))
    tiers = {str(d.get("tier")) for _, _, d in graph.edges(data=True)} - {LOOPBACK_TIER}
    return fabric_from_graph(graph, {t: link_achievable_fraction(t, medium, gpu) for t in tiers})


def run_flows(graph: nx.DiGraph, batch: FlowBatch, *, pxn: bool = False,
              batch_window_rel: float = 0.0) -> FlowRun:
    """Start ``batch`` at t = 0 on ``graph`` (derated); time until the last byte arrives.
    ``batch_window_rel`` > 0: the engine's finish batching (:mod:`moesim.engine.network`),
    for batches of tens of thousands of flows; 0 (default): exact."""
    fabric = derated_fabric(graph)
    env = simpy.Environment()
    router = PxnRouter(fabric, mode="dmodk") if pxn else Router(fabric, mode="dmodk")
    net = FlowNetwork(env, router, batch_window_rel=batch_window_rel, record_timeline=False)
    keep = batch.size_bytes > 0
    gid, done = net.expect(int(np.count_nonzero(keep)))
    net.start(batch.src[keep], batch.dst[keep], batch.size_bytes[keep], gid)
    env.run(until=done)
    finish = net.flows["finish_s"]
    return FlowRun(time_s=float(finish.max(initial=0.0)), fabric=fabric,
                   link_bytes=net.stats.bytes.copy())
