"""Routes between GPUs: equal-cost shortest paths, ECMP or spraying.

GPUs are endpoints and never transit. For each destination GPU the router keeps, for every
node, its hop distance to the destination (one reverse breadth-first search, run for a
block of destinations at once, see :mod:`moesim.engine.paths`); a link u->v lies on an
equal-cost path when ``dist[v] == dist[u] - 1``.

- ``ecmp``: each switch picks one next hop by a deterministic hash of
  (source, destination, switch), as real switches hash a connection's 5-tuple,
  so two connections can collide on one uplink while another idles. The hash reads
  ``hash_ids`` (the GPUs' and nodes' ids in the whole fabric) where the fabric is a part of
  a larger one (:mod:`moesim.fabric.subfabric`), so a part routes as the whole does.
- ``dmodk``: destination-based deterministic routing, as InfiniBand subnet
  managers program fat trees (OpenSM ``ftree``/D-mod-K): the up-port is the
  destination's host index modulo the number of choices, which spreads an
  all-to-all evenly over uplinks and downlinks.
- ``spray``: the flow is split evenly over all equal-cost paths; a link's
  weight is the fraction of the flow's bytes that crosses it.

Routes are computed for all requested (source, destination) pairs at once (numpy over the
pairs, a Python loop over hops only) and cached per pair; a single cached pair (a
point-to-point send) is looked up without numpy batch calls.

A route is a list of (link, weight) pairs; ``RouteSet`` holds many in CSR form.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from moesim.engine.fabric import Fabric
from moesim.engine.paths import LinkOrder, NextHops, mix_hash
from moesim.engine.routecache import RouteTable
from moesim.errors import ConfigError, FabricError

MULTIPATH_MODES = ("ecmp", "dmodk", "spray")


@dataclass(frozen=True)
class RouteSet:
    """Routes of n (src, dst) pairs: pairs ``ptr[i]:ptr[i+1]`` of ``link``/``weight``."""

    ptr: np.ndarray
    link: np.ndarray
    weight: np.ndarray
    latency_s: np.ndarray  # per route: bytes-weighted mean path latency
    cap_Bps: np.ndarray  # per route: rate an otherwise idle fabric would give it


class Router:
    """Equal-cost routing on one fabric; ``mode`` is ``ecmp``, ``dmodk`` or ``spray``."""

    def __init__(self, fabric: Fabric, mode: str = "ecmp", hash_salt: int = 0,
                 hash_ids: tuple[np.ndarray, np.ndarray] | None = None) -> None:
        if mode not in MULTIPATH_MODES:
            allowed = ", ".join(MULTIPATH_MODES)
            raise ConfigError("network.multipath", f"unknown '{mode}'; allowed: {allowed}")
        self.fabric = fabric
        self.mode = mode
        self.salt = np.uint64(hash_salt & 0xFFFFFFFF)
        self._links = LinkOrder(fabric)
        graph = fabric.graph
        self._dmodk_key = np.array(
            [int(graph.nodes[fabric.node_names[n]].get("host", g))
             for g, n in enumerate(fabric.gpu_nodes)],
            dtype=np.uint64,
        )
        self._table = RouteTable(fabric)
        gpu_ids, node_ids = hash_ids or (np.arange(fabric.n_gpus),
                                         np.arange(len(fabric.node_names)))
        self._hash_gpu = np.asarray(gpu_ids).astype(np.uint64)  # ECMP's names of the GPUs
        self._hash_node = np.asarray(node_ids).astype(np.uint64)  # ... and of the nodes

    def routes(self, src_gpu: np.ndarray, dst_gpu: np.ndarray) -> RouteSet:
        """Routes for the pairs ``(src_gpu[i], dst_gpu[i])`` (src != dst)."""
        src_gpu = np.asarray(src_gpu, dtype=np.int64)
        dst_gpu = np.asarray(dst_gpu, dtype=np.int64)
        n_gpu = self.fabric.n_gpus
        if src_gpu.shape == dst_gpu.shape == (1,):  # a point-to-point send, usually cached
            src, dst = int(src_gpu[0]), int(dst_gpu[0])
            row = self._table.row(src, dst) if 0 <= min(src, dst) <= max(src, dst) < n_gpu else None
            if row is not None:
                return self._one(row)
        if src_gpu.size and (min(src_gpu.min(), dst_gpu.min()) < 0
                             or max(src_gpu.max(), dst_gpu.max()) >= n_gpu):
            raise FabricError(f"route asks for a GPU outside 0..{n_gpu - 1}")
        rows = self._table.rows(src_gpu, dst_gpu, self._build)
        tab = self._table
        lens = tab.length[rows]
        ptr = np.concatenate(([0], np.cumsum(lens)))
        width = int(lens.max(initial=0))
        valid = np.arange(width)[None, :] < lens[:, None]
        return RouteSet(ptr=ptr, link=tab.link[rows, :width][valid],
                        weight=tab.weight[rows, :width][valid],
                        latency_s=tab.latency_s[rows], cap_Bps=tab.cap_Bps[rows])

    def _one(self, row: int) -> RouteSet:
        """The route of table row ``row`` (what :meth:`routes` returns for its pair)."""
        tab = self._table
        n = int(tab.length[row])
        return RouteSet(ptr=np.array([0, n], dtype=np.int64), link=tab.link[row, :n].copy(),
                        weight=tab.weight[row, :n].copy(),
                        latency_s=tab.latency_s[row : row + 1].copy(),
                        cap_Bps=tab.cap_Bps[row : row + 1].copy())

    # ----------------------------------------------------------- building
    def _build(self, srcs: np.ndarray, dsts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Padded (links, weights), one row per pair; pairs come sorted by destination."""
        fab = self.fabric
        blocks: list[tuple[np.ndarray, np.ndarray]] = []
        ordered = np.sort(dsts)  # np.unique's values without its numpy.ma import (25 ms)
        uniq = ordered[np.concatenate(([True], ordered[1:] != ordered[:-1]))]
        step = self._links.block_size()
        for i in range(0, uniq.size, step):
            block = uniq[i : i + step]
            lo = int(np.searchsorted(dsts, block[0], side="left"))
            hi = int(np.searchsorted(dsts, block[-1], side="right"))
            s, d = srcs[lo:hi], dsts[lo:hi]
            dist = self._links.distances(fab.gpu_nodes[block])
            row = np.searchsorted(block, d)
            if np.any(dist[row, fab.gpu_nodes[s]] <= 0):
                bad = int(d[np.argmax(dist[row, fab.gpu_nodes[s]] <= 0)])
                raise FabricError(f"no route to {fab.gpu_name(bad)} from some source "
                                  "(src == dst or disconnected)")
            hops = NextHops(self._links, dist, fab.gpu_nodes[block])
            walk = self._spray if self.mode == "spray" else self._walk
            blocks.append(walk(s, d, row, dist, hops))
        width = max(lk.shape[1] for lk, _ in blocks)
        links = np.concatenate([_widen(lk, width, -1) for lk, _ in blocks])
        weights = np.concatenate([_widen(wt, width, 0.0) for _, wt in blocks])
        return links, weights

    def _walk(self, srcs: np.ndarray, dsts: np.ndarray, row: np.ndarray, dist: np.ndarray,
              hops: NextHops) -> tuple[np.ndarray, np.ndarray]:
        """One next hop per switch: by D-mod-K or by the (src, dst, switch) hash."""
        fab = self.fabric
        cur = fab.gpu_nodes[srcs].copy()
        n_hops = dist[row, cur]
        links = np.full((srcs.size, int(n_hops.max())), -1, dtype=np.int64)
        for h in range(links.shape[1]):
            live = np.flatnonzero(n_hops > h)
            at, r = cur[live], row[live]
            if self.mode == "dmodk":
                key = self._dmodk_key[dsts[live]]
            else:
                key = mix_hash(self._hash_gpu[srcs[live]], self._hash_gpu[dsts[live]],
                               self._hash_node[at], self.salt)
            k = (key % hops.count(r, at).astype(np.uint64)).astype(np.int64)
            chosen = hops.pick(r, at, k)
            links[live, h] = chosen
            cur[live] = fab.link_dst[chosen]
        return links, (links >= 0).astype(np.float64)

    def _spray(self, srcs: np.ndarray, dsts: np.ndarray, row: np.ndarray, dist: np.ndarray,
               hops: NextHops) -> tuple[np.ndarray, np.ndarray]:
        """Every link of every equal-cost path, weighted by the share of paths crossing it."""
        fab = self.fabric
        n_nodes = len(fab.node_names)
        paths = hops.path_counts(dist)
        pair: np.ndarray = np.arange(srcs.size)
        node: np.ndarray = fab.gpu_nodes[srcs]
        frac: np.ndarray = np.ones(srcs.size)
        parts: list[tuple[np.ndarray, ...]] = []
        for hop in range(int(dist[row, node].max())):
            n = hops.count(row[pair], node)
            at = np.repeat(np.arange(pair.size), n)
            k = np.arange(at.size) - np.repeat(np.cumsum(n) - n, n)
            p, r, u = pair[at], row[pair[at]], node[at]
            link = hops.pick(r, u, k)
            head = fab.link_dst[link]
            share = frac[at] * paths[r, head] / paths[r, u]
            parts.append((p, np.full(p.size, hop), link, share))
            go = head != fab.gpu_nodes[dsts[p]]
            key, inv = np.unique(p[go] * n_nodes + head[go], return_inverse=True)
            pair, node, frac = key // n_nodes, key % n_nodes, np.bincount(inv, share[go])
        p, hop_of, link, share = (np.concatenate(x) for x in zip(*parts, strict=True))
        keep = share > 1e-12
        p, hop_of, link, share = p[keep], hop_of[keep], link[keep], share[keep]
        order = np.lexsort((link, hop_of, p))
        p, link, share = p[order], link[order], share[order]
        count = np.bincount(p, minlength=srcs.size)
        col = np.arange(p.size) - np.repeat(np.cumsum(count) - count, count)
        links = np.full((srcs.size, int(count.max())), -1, dtype=np.int64)
        weights = np.zeros(links.shape)
        links[p, col], weights[p, col] = link, share
        return links, weights


def _widen(a: np.ndarray, width: int, fill: float) -> np.ndarray:
    extra = width - a.shape[1]
    return np.pad(a, ((0, 0), (0, extra)), constant_values=fill) if extra > 0 else a
