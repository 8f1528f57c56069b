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

    def distances(self, dst_nodes: np.ndarray) -> np.ndarray:
        """Hop distance (destinations x nodes) of every node to each of ``dst_nodes``; -1 if
        unreachable."""
        n_dst, n_nodes = dst_nodes.size, len(self.fabric.node_names)
        rows = np.arange(n_dst)
        dist = np.full((n_dst, n_nodes), -1, dtype=np.int32)
        dist[rows, dst_nodes] = 0
        frontier = np.zeros((n_dst, n_nodes), dtype=bool)
        frontier[rows, dst_nodes] = True
        level = 0
        starts = self.seg[self.sources]
        while frontier.any():
            level += 1
            reached = np.logical_or.reduceat(frontier[:, self.dst], starts, axis=1)
            new = reached & (dist[:, self.sources] < 0)
            sub = dist[:, self.sources]
            sub[new] = level
            dist[:, self.sources] = sub
            frontier[:] = False
            frontier[:, self.sources] = new & ~self.is_gpu[self.sources]
        return dist


class NextHops:
    """Links that step closer, per (destination row, node), for one block of destinations."""

    def __init__(self, links: LinkOrder, dist: np.ndarray, dst_nodes: np.ndarray) -> None:
        n_dst, n_links = dist.shape[0], links.order.size
        head = dist[:, links.dst]
        ok = (head == dist[:, links.src] - 1) & (head >= 0)
        ok &= ~links.is_gpu[links.dst] | (links.dst[None, :] == dst_nodes[:, None])
        self.links = links
        self.ok = ok
        self.dst_nodes = dst_nodes
        self.n_links = n_links
        self.before = np.zeros((n_dst, n_links + 1), dtype=np.int64)  # ok links before position
        np.cumsum(ok, axis=1, out=self.before[:, 1:])
        self.row_base = np.concatenate(([0], np.cumsum(self.before[:, -1])[:-1]))
        self.flat = np.flatnonzero(ok)  # (row * n_links + position) of every ok link

    def count(self, row: np.ndarray, node: np.ndarray) -> np.ndarray:
        seg = self.links.seg
        return self.before[row, seg[node + 1]] - self.before[row, seg[node]]

    def pick(self, row: np.ndarray, node: np.ndarray, k: np.ndarray) -> np.ndarray:
        """Link id of the ``k``-th (0-based) closer link of ``node`` towards row's destination."""
        rank = self.row_base[row] + self.before[row, self.links.seg[node]] + k
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
