"""Routes between GPUs: equal-cost shortest paths, ECMP or spraying.

GPUs are endpoints and never transit. For each destination GPU the router runs
one reverse breadth-first search and keeps, for every node, its hop distance
to the destination; a link u->v lies on an equal-cost path when
``dist[v] == dist[u] - 1``.

- ``ecmp``: each switch picks one next hop by a deterministic hash of
  (source, destination, switch), as real switches hash a connection's 5-tuple,
  so two connections can collide on one uplink while another idles.
- ``dmodk``: destination-based deterministic routing, as InfiniBand subnet
  managers program fat trees (OpenSM ``ftree``/D-mod-K): the up-port is the
  destination's host index modulo the number of choices, which spreads an
  all-to-all evenly over uplinks and downlinks.
- ``spray``: the flow is split evenly over all equal-cost paths; a link's
  weight is the fraction of the flow's bytes that crosses it.

Routes are computed per destination for many sources at once (numpy over the
sources, a Python loop over hops only) and cached.

A route is a list of (link, weight) pairs; ``RouteSet`` holds many in CSR form.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from sim.engine.fabric import Fabric
from sim.errors import ConfigError, FabricError

MULTIPATH_MODES = ("ecmp", "dmodk", "spray")
_MASK64 = np.uint64(0xFFFFFFFFFFFFFFFF)


@dataclass(frozen=True)
class RouteSet:
    """Routes of n (src, dst) pairs: pairs ``ptr[i]:ptr[i+1]`` of ``link``/``weight``."""

    ptr: np.ndarray
    link: np.ndarray
    weight: np.ndarray
    latency_s: np.ndarray  # per route: bytes-weighted mean path latency
    cap_Bps: np.ndarray  # per route: rate an otherwise idle fabric would give it


class Router:
    """Equal-cost routing on one fabric; ``mode`` is ``ecmp`` or ``spray``."""

    def __init__(self, fabric: Fabric, mode: str = "ecmp", hash_salt: int = 0) -> None:
        if mode not in MULTIPATH_MODES:
            raise ConfigError("network.multipath", f"unknown '{mode}'; allowed: {', '.join(MULTIPATH_MODES)}")
        self.fabric = fabric
        self.mode = mode
        self.salt = np.uint64(hash_salt & 0xFFFFFFFF)
        self._is_gpu = fabric.node_kind == "gpu"
        self._out = _padded_out_links(fabric)
        graph = fabric.graph
        self._dmodk_key = np.array(
            [int(graph.nodes[fabric.node_names[n]].get("host", g)) for g, n in enumerate(fabric.gpu_nodes)],
            dtype=np.uint64,
        )
        self._cache: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
        self._dist: dict[int, np.ndarray] = {}

    def routes(self, src_gpu: np.ndarray, dst_gpu: np.ndarray) -> RouteSet:
        """Routes for the pairs ``(src_gpu[i], dst_gpu[i])`` (src != dst)."""
        src_gpu = np.asarray(src_gpu, dtype=np.int64)
        dst_gpu = np.asarray(dst_gpu, dtype=np.int64)
        n_gpu = self.fabric.n_gpus
        if src_gpu.size and (min(src_gpu.min(), dst_gpu.min()) < 0 or max(src_gpu.max(), dst_gpu.max()) >= n_gpu):
            raise FabricError(f"route asks for a GPU outside 0..{n_gpu - 1}")
        blocks = []
        for d in np.unique(dst_gpu):
            sel = np.nonzero(dst_gpu == d)[0]
            blocks.append((sel, *self._rows(int(d), src_gpu[sel])))
        width = max([1] + [lk.shape[1] for _, lk, _ in blocks])
        rows_link = np.full((src_gpu.size, width), -1, dtype=np.int64)
        rows_w = np.zeros((src_gpu.size, width))
        for sel, lk, wt in blocks:
            rows_link[sel, : lk.shape[1]] = lk
            rows_w[sel, : wt.shape[1]] = wt
        return self._pack(rows_link, rows_w)

    def _pack(self, rows_link: np.ndarray, rows_w: np.ndarray) -> RouteSet:
        valid = rows_link >= 0
        counts = valid.sum(axis=1)
        if np.any(counts == 0):
            raise FabricError("no route between some GPU pair (src == dst or disconnected)")
        ptr = np.concatenate(([0], np.cumsum(counts)))
        link = rows_link[valid]
        weight = rows_w[valid]
        lat = np.where(valid, self.fabric.latency_s[np.maximum(rows_link, 0)] * rows_w, 0.0).sum(axis=1)
        with np.errstate(divide="ignore"):
            per_link = np.where(valid, self.fabric.cap_Bps[np.maximum(rows_link, 0)] / np.where(valid, rows_w, 1.0), np.inf)
        return RouteSet(ptr=ptr, link=link, weight=weight, latency_s=lat, cap_Bps=per_link.min(axis=1))

    def _rows(self, dst: int, srcs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(links, weights) padded, one row per source in ``srcs``, to GPU ``dst``."""
        if dst not in self._cache:
            self._dist[dst] = self._distances(int(self.fabric.gpu_nodes[dst]))
            n = self.fabric.n_gpus
            self._cache[dst] = (np.full((n, 1), -1, dtype=np.int32), np.zeros((n, 1)), np.zeros(n, bool))
        links, weights, done = self._cache[dst]
        todo = np.unique(srcs[~done[srcs]])
        if todo.size:
            build = self._spray_rows if self.mode == "spray" else self._ecmp_rows
            lk, wt = build(dst, todo, self._dist[dst])
            if lk.shape[1] > links.shape[1]:
                grow = lk.shape[1] - links.shape[1]
                links = np.pad(links, ((0, 0), (0, grow)), constant_values=-1)
                weights = np.pad(weights, ((0, 0), (0, grow)))
            links[todo, : lk.shape[1]] = lk
            weights[todo, : wt.shape[1]] = wt
            done[todo] = True
            self._cache[dst] = (links, weights, done)
        return links[srcs].astype(np.int64), weights[srcs]

    def _distances(self, dst_node: int) -> np.ndarray:
        """Hop distance of every node to ``dst_node``; GPUs other than it are not expanded."""
        fab = self.fabric
        dist = np.full(len(fab.node_names), -1, dtype=np.int64)
        dist[dst_node] = 0
        frontier = np.array([dst_node])
        level = 0
        while frontier.size:
            level += 1
            into = np.isin(fab.link_dst, frontier)
            cand = np.unique(fab.link_src[into])
            cand = cand[dist[cand] < 0]
            dist[cand] = level
            frontier = cand[~self._is_gpu[cand]]
        return dist

    def _next_links(self, cur: np.ndarray, dist: np.ndarray, dst_node: int) -> np.ndarray:
        """Candidate out-links (padded -1) of nodes ``cur`` that step one hop closer."""
        cand = self._out[cur]
        head = self.fabric.link_dst[np.maximum(cand, 0)]
        ok = (cand >= 0) & (dist[head] == dist[cur][:, None] - 1) & (dist[head] >= 0)
        ok &= (~self._is_gpu[head]) | (head == dst_node)
        return np.where(ok, cand, -1)

    def _ecmp_rows(self, dst: int, srcs: np.ndarray, dist: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        fab = self.fabric
        dst_node = int(fab.gpu_nodes[dst])
        cur = fab.gpu_nodes[srcs].copy()
        if np.any(dist[cur] <= 0):
            raise FabricError(f"no route to {fab.gpu_name(dst)} from some source (src == dst or disconnected)")
        hops = int(dist[cur].max())
        links = np.full((srcs.size, hops), -1, dtype=np.int64)
        src_ids = srcs.astype(np.uint64)
        for h in range(hops):
            live = cur != dst_node
            cand = self._next_links(cur[live], dist, dst_node)
            n_ok = (cand >= 0).sum(axis=1)
            if self.mode == "dmodk":
                key = np.full(int(live.sum()), self._dmodk_key[dst], dtype=np.uint64)
            else:
                key = _mix(src_ids[live], np.uint64(dst), cur[live].astype(np.uint64), self.salt)
            pick = (key % n_ok.astype(np.uint64)).astype(np.int64)
            order = np.cumsum(cand >= 0, axis=1) - 1
            chosen = np.where((order == pick[:, None]) & (cand >= 0), cand, -1).max(axis=1)
            links[np.nonzero(live)[0], h] = chosen
            cur[live] = fab.link_dst[chosen]
        return links, (links >= 0).astype(float)

    def _spray_rows(self, dst: int, srcs: np.ndarray, dist: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        fab = self.fabric
        dst_node = int(fab.gpu_nodes[dst])
        if np.any(dist[fab.gpu_nodes[srcs]] <= 0):
            raise FabricError(f"no route to {fab.gpu_name(dst)} from some source (src == dst or disconnected)")
        ok = (dist[fab.link_dst] == dist[fab.link_src] - 1) & (dist[fab.link_dst] >= 0)
        ok &= (~self._is_gpu[fab.link_dst]) | (fab.link_dst == dst_node)
        n_paths = np.zeros(len(fab.node_names))
        n_paths[dst_node] = 1.0
        for level in range(1, int(dist.max()) + 1):
            at = ok & (dist[fab.link_src] == level)
            np.add.at(n_paths, fab.link_src[at], n_paths[fab.link_dst[at]])
        frac = np.zeros((srcs.size, len(fab.node_names)))
        frac[np.arange(srcs.size), fab.gpu_nodes[srcs]] = 1.0
        cols: list[np.ndarray] = []
        vals: list[np.ndarray] = []
        for level in range(int(dist.max()), 0, -1):
            at = np.nonzero(ok & (dist[fab.link_src] == level))[0]
            share = n_paths[fab.link_dst[at]] / np.maximum(n_paths[fab.link_src[at]], 1e-300)
            flow = frac[:, fab.link_src[at]] * share
            np.add.at(frac.T, fab.link_dst[at], flow.T)
            cols.append(at)
            vals.append(flow)
        link_ids = np.concatenate(cols)
        on_link = np.concatenate(vals, axis=1)
        used = on_link > 1e-12
        width = max(int(used.sum(axis=1).max()), 1)
        order = np.argsort(~used, axis=1, kind="stable")[:, :width]
        rows = np.arange(srcs.size)[:, None]
        links = np.where(used[rows, order], link_ids[order], -1)
        return links, np.where(links >= 0, on_link[rows, order], 0.0)


def _padded_out_links(fabric: Fabric) -> np.ndarray:
    """Out-links of every node, padded with -1 to the largest out-degree."""
    n_nodes = len(fabric.node_names)
    deg = np.bincount(fabric.link_src, minlength=n_nodes)
    order = np.argsort(fabric.link_src, kind="stable")
    out = np.full((n_nodes, max(int(deg.max()), 1)), -1, dtype=np.int64)
    start = np.concatenate(([0], np.cumsum(deg)[:-1]))
    col = np.arange(order.size) - np.repeat(start, deg)
    out[fabric.link_src[order], col] = order
    return out


def _mix(a: np.ndarray, b: np.uint64, c: np.ndarray, salt: np.uint64) -> np.ndarray:
    """A splitmix64-style hash of three integers (deterministic across runs)."""
    with np.errstate(over="ignore"):
        x = a * np.uint64(0x9E3779B97F4A7C15) ^ (b + salt) * np.uint64(0xBF58476D1CE4E5B9)
        x ^= c * np.uint64(0x94D049BB133111EB)
        x ^= x >> np.uint64(30)
        x *= np.uint64(0xBF58476D1CE4E5B9)
        x ^= x >> np.uint64(27)
        x *= np.uint64(0x94D049BB133111EB)
        x ^= x >> np.uint64(31)
    return x & _MASK64
