"""PXN-style routing: cross-rail traffic hops over NVLink to the rail-matched GPU first.

On rail-optimized fabrics NCCL's PXN moves data bound for another host's GPU
j over NVLink to the local GPU on j's rail, which then sends it out of its own
NIC, so the message stays on one rail leaf instead of climbing to the spine.
(Multi-plane fabrics need the same trick: a NIC only reaches its own plane.)

``PxnRouter`` wraps a :class:`Router`: for a pair on different hosts whose
NICs sit on different rails (or planes), the route is ``src -> nvswitch ->
proxy`` followed by the base route ``proxy -> dst``; every other pair keeps the
base route. The proxy is the GPU on the source's host with the destination's
local index. Fabrics without host/local/rail attributes are routed unchanged.
"""

from __future__ import annotations

import numpy as np

from moesim.engine.routing import Router, RouteSet


class PxnRouter(Router):
    """A router that sends cross-rail inter-host traffic through a same-host proxy GPU."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        graph, fab = self.fabric.graph, self.fabric
        attrs = [graph.nodes[fab.node_names[n]] for n in fab.gpu_nodes]
        self._host = np.array([int(a.get("host", -1)) for a in attrs])
        self._local = np.array([int(a.get("local", -1)) for a in attrs])
        per_host = int(graph.graph.get("gpus_per_host", 0) or 0)
        self._enabled = per_host > 1 and bool((self._host >= 0).all())
        self._per_host = max(per_host, 1)

    def routes(self, src_gpu: np.ndarray, dst_gpu: np.ndarray) -> RouteSet:
        src = np.asarray(src_gpu, dtype=np.int64)
        dst = np.asarray(dst_gpu, dtype=np.int64)
        if not self._enabled or src.size == 0:
            return super().routes(src, dst)
        proxy = self._host[src] * self._per_host + self._local[dst]
        cross = (self._host[src] != self._host[dst]) & (proxy != src)
        if not cross.any():
            return super().routes(src, dst)
        direct = super().routes(src[~cross], dst[~cross])
        hop = super().routes(src[cross], proxy[cross])
        tail = super().routes(proxy[cross], dst[cross])
        return _splice(cross, direct, hop, tail)


def _splice(cross: np.ndarray, direct: RouteSet, hop: RouteSet, tail: RouteSet) -> RouteSet:
    """Routes of all pairs: ``direct`` where not ``cross``, else ``hop`` then ``tail``."""
    keep, which = np.flatnonzero(~cross), np.flatnonzero(cross)
    lens = np.zeros(cross.size, dtype=np.int64)
    lens[keep] = np.diff(direct.ptr)
    lens[which] = np.diff(hop.ptr) + np.diff(tail.ptr)
    ptr = np.concatenate(([0], np.cumsum(lens)))
    link = np.empty(int(ptr[-1]), dtype=np.int64)
    weight = np.empty(int(ptr[-1]))
    _scatter(link, weight, ptr, keep, direct, 0)
    _scatter(link, weight, ptr, which, hop, 0)
    _scatter(link, weight, ptr, which, tail, np.diff(hop.ptr))
    latency = np.zeros(cross.size)
    latency[keep], latency[which] = direct.latency_s, hop.latency_s + tail.latency_s
    cap = np.zeros(cross.size)
    cap[keep], cap[which] = direct.cap_Bps, np.minimum(hop.cap_Bps, tail.cap_Bps)
    return RouteSet(ptr=ptr, link=link, weight=weight, latency_s=latency, cap_Bps=cap)


def _scatter(
    link: np.ndarray, weight: np.ndarray, ptr: np.ndarray, rows: np.ndarray,
    src: RouteSet, offset: np.ndarray | int,
) -> None:
    """Copy route i of ``src`` into row ``rows[i]``, starting ``offset`` into that row."""
    lens = np.diff(src.ptr)
    if lens.sum() == 0:
        return
    within = np.arange(lens.sum()) - np.repeat(np.cumsum(lens) - lens, lens)
    from_idx = np.repeat(src.ptr[:-1], lens) + within
    to_idx = np.repeat(ptr[rows] + offset, lens) + within
    link[to_idx] = src.link[from_idx]
    weight[to_idx] = src.weight[from_idx]
