"""Routes of a whole fabric computed on small sub-fabrics: one per pair of GPU blocks.

The engine's router finds equal-cost paths with a reverse breadth-first search per
destination over the fabric it is given (dense in destinations x links), which at 9,216 GPUs
costs about 0.1-0.5 s per destination on the whole fabric. When the GPUs fall into blocks
(a pipeline stage's GPUs: ``block_gpus`` consecutive ids) and traffic stays inside a block or
between two blocks, :class:`BlockRouter` routes each pair on the sub-fabric of its two blocks'
hosts (:meth:`moesim.fabric.subfabric.GraphIndex.global_router`: the same links as the whole
fabric's D-mod-K or spray routes, named by the whole fabric's link ids), one sub-fabric per
block pair, built on first use.
"""

from __future__ import annotations

import numpy as np

from moesim.engine.routing import Router, RouteSet
from moesim.fabric.subfabric import GraphIndex


class BlockRouter(Router):
    """Whole-fabric routes, each computed on the sub-fabric of its source's and destination's
    blocks of ``block_gpus`` GPUs (module docstring)."""

    def __init__(self, index: GraphIndex, block_gpus: int) -> None:
        self.index = index
        self.block = block_gpus
        self.fabric = index.whole().fabric
        self.mode = index.spec.multipath
        self._routers: dict[tuple[int, int], Router] = {}

    def routes(self, src_gpu: np.ndarray, dst_gpu: np.ndarray) -> RouteSet:
        src = np.asarray(src_gpu, dtype=np.int64)
        dst = np.asarray(dst_gpu, dtype=np.int64)
        a, b = src // self.block, dst // self.block
        code = np.minimum(a, b) * (self.fabric.n_gpus + 1) + np.maximum(a, b)
        keys, inv = np.unique(code, return_inverse=True)
        if keys.size == 1:
            return self._router(int(keys[0])).routes(src, dst)
        parts = [(np.flatnonzero(inv == i), int(k)) for i, k in enumerate(keys.tolist())]
        sets = [(idx, self._router(k).routes(src[idx], dst[idx])) for idx, k in parts]
        return _merge(sets, src.size)

    def _router(self, code: int) -> Router:
        lo, hi = divmod(code, self.fabric.n_gpus + 1)
        router = self._routers.get((lo, hi))
        if router is None:
            blocks = [lo] if lo == hi else [lo, hi]
            gpus = np.concatenate([np.arange(k * self.block, (k + 1) * self.block)
                                   for k in blocks])
            router = self._routers[(lo, hi)] = self.index.global_router(gpus.tolist())
        return router


def _merge(sets: list[tuple[np.ndarray, RouteSet]], n: int) -> RouteSet:
    """One RouteSet of ``n`` pairs from parts covering positions ``idx`` each."""
    lens = np.zeros(n, dtype=np.int64)
    latency, cap = np.zeros(n), np.zeros(n)
    for idx, rs in sets:
        lens[idx], latency[idx], cap[idx] = np.diff(rs.ptr), rs.latency_s, rs.cap_Bps
    ptr = np.concatenate(([0], np.cumsum(lens)))
    link = np.zeros(int(ptr[-1]), dtype=np.int64)
    weight = np.zeros(int(ptr[-1]))
    for idx, rs in sets:
        k = np.diff(rs.ptr)
        pos = np.arange(int(k.sum())) + np.repeat(ptr[idx] - rs.ptr[:-1], k)
        link[pos], weight[pos] = rs.link, rs.weight
    return RouteSet(ptr=ptr, link=link, weight=weight, latency_s=latency, cap_Bps=cap)
