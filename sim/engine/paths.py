"""Equal-cost next hops towards many destination nodes at once.

For a block of destinations one reverse breadth-first search runs over all of them together
(numpy over destinations x links, a Python loop over hop levels only). GPUs are endpoints:
the search never expands a GPU other than the destination. A link u->v then *steps closer*
to destination d when ``dist[d, v] == dist[d, u] - 1`` (and v is no other GPU).

:class:`NextHops` keeps, per (destination, node), the links that step closer in link-id
order, addressable by rank: ``count(row, node)`` and ``pick(row, node, k)`` are a few
gathers for any number of (row, node, k) at once.
"""

from __future__ import annotations

from functools import cached_property

import numpy as np

from moesim.engine.fabric import Fabric

BLOCK_ELEMENTS = 1 << 22
"""Destinations per block are chosen so that a block's tables hold about this many entries."""


class LinkOrder:
    """A fabric's links sorted by source node (stable): node u owns ``seg[u]:seg[u+1]``."""

    def __init__(self, fabric: Fabric) -> None:
        n_nodes = len(fabric.node_names)
        self.fabric = fabric
        self.order = np.argsort(fabric.link_src, kind="stable")
        self.src = fabric.link_src[self.order]
        self.dst = fabric.link_dst[self.order]
        self.seg = np.concatenate(([0], np.cumsum(np.bincount(fabric.link_src,
                                                               minlength=n_nodes))))
        self.is_gpu = fabric.node_kind == "gpu"
        self.sources = np.flatnonzero(np.diff(self.seg) > 0)  # nodes with out-links

    def block_size(self) -> int:
        return max(1, BLOCK_ELEMENTS // max(self.order.size, len(self.fabric.node_names)))

    @cached_property
    def _into(self) -> tuple[np.ndarray, np.ndarray]:
        """Links grouped by head node: (offsets, n_nodes + 1; their tails)."""
        n_nodes = len(self.fabric.node_names)
        order = np.argsort(self.fabric.link_dst, kind="stable")
        seg = np.concatenate(([0], np.cumsum(np.bincount(self.fabric.link_dst,
                                                          minlength=n_nodes))))
        return seg, self.fabric.link_src[order]

    def distances(self, dst_nodes: np.ndarray) -> np.ndarray:
        """Hop distance (destinations x nodes) of every node to each of ``dst_nodes``; -1 if
        unreachable. A sparse reverse search: each level expands only the frontier's
        in-links (every link once per destination, not once per level)."""
        n_dst, n_nodes = dst_nodes.size, len(self.fabric.node_names)
        seg, tail = self._into
        dist = np.full(n_dst * n_nodes, -1, dtype=np.int32)
        stamp = np.zeros(n_dst * n_nodes, dtype=np.int64)  # dedup of (row, node) pairs
        row, node = np.arange(n_dst), np.asarray(dst_nodes, dtype=np.int64)
        dist[row * n_nodes + node] = 0
        level = 0
        while row.size:
            level += 1
            count = seg[node + 1] - seg[node]
            at = np.repeat(np.arange(node.size), count)
            pos = np.arange(at.size) - np.repeat(np.cumsum(count) - count, count) + seg[node][at]
            cell = row[at] * n_nodes + tail[pos]
            cell = cell[dist[cell] < 0]
            stamp[cell] = np.arange(cell.size)
            cell = cell[stamp[cell] == np.arange(cell.size)]
            dist[cell] = level
            row, node = np.divmod(cell, n_nodes)
            inner = ~self.is_gpu[node]  # GPUs are endpoints: reached, never expanded
            row, node = row[inner], node[inner]
        return dist.reshape(n_dst, n_nodes)


class NextHops:
    """Links that step closer, per (destination row, node), for one block of destinations."""

    def __init__(self, links: LinkOrder, dist: np.ndarray, dst_nodes: np.ndarray) -> None:
        n_links = links.order.size
        head = dist[:, links.dst]
        ok = (head == dist[:, links.src] - 1) & (head >= 0)
        ok &= ~links.is_gpu[links.dst] | (links.dst[None, :] == dst_nodes[:, None])
        self.links = links
        self.ok = ok
        self.dst_nodes = dst_nodes
        self.n_links = n_links
        self.flat = np.flatnonzero(ok)  # (row * n_links + position) of every ok link, sorted

    def _first(self, row: np.ndarray, position: np.ndarray) -> np.ndarray:
        """Rank in ``flat`` of row's first ok link at or after ``position`` (a search, not a
        running count over every link)."""
        return np.searchsorted(self.flat, row * self.n_links + position)

    def count(self, row: np.ndarray, node: np.ndarray) -> np.ndarray:
        seg = self.links.seg
        return self._first(row, seg[node + 1]) - self._first(row, seg[node])

    def pick(self, row: np.ndarray, node: np.ndarray, k: np.ndarray) -> np.ndarray:
        """Link id of the ``k``-th (0-based) closer link of ``node`` towards row's destination."""
        rank = self._first(row, self.links.seg[node]) + k
        return self.links.order[self.flat[rank] - row * self.n_links]


    def path_counts(self, dist: np.ndarray) -> np.ndarray:
        """Equal-cost paths (destinations x nodes) from every node to each destination."""
        links = self.links
        count = np.zeros(dist.shape)
        count[np.arange(dist.shape[0]), self.dst_nodes] = 1.0
        starts = links.seg[links.sources]
        for level in range(1, int(dist.max()) + 1):
            summed = np.add.reduceat(np.where(self.ok, count[:, links.dst], 0.0), starts, axis=1)
            now = count[:, links.sources]
            count[:, links.sources] = np.where(dist[:, links.sources] == level, summed, now)
        return count


def mix_hash(a: np.ndarray, b: np.ndarray, c: np.ndarray, salt: np.uint64) -> np.ndarray:
    """A splitmix64-style hash of three integer arrays (deterministic across runs)."""
    with np.errstate(over="ignore"):
        x = a * np.uint64(0x9E3779B97F4A7C15) ^ (b + salt) * np.uint64(0xBF58476D1CE4E5B9)
        x ^= c * np.uint64(0x94D049BB133111EB)
        x ^= x >> np.uint64(30)
        x *= np.uint64(0xBF58476D1CE4E5B9)
        x ^= x >> np.uint64(27)
        x *= np.uint64(0x94D049BB133111EB)
        x ^= x >> np.uint64(31)
    return x
