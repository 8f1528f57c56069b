"""The sparse reverse search (``LinkOrder.distances``) and the searched next-hop ranks
(``NextHops.count`` / ``pick``) equal the dense level-by-level versions they replaced, on
every shipped fabric preset and on a fabric with a cut link (unreachable nodes stay -1)."""

from __future__ import annotations

import numpy as np
import pytest

from moesim import topologies
from moesim.engine.paths import LinkOrder, NextHops
from moesim.fabric.build import fabric_for

PRESETS = ["fat-tree-k8", "hgx-h100", "mpft-h800", "nvl72-gb200", "rail-h100-4x-4to1",
           "rail-h100-64", "rail-h800-64"]


def _dense_distances(links: LinkOrder, dst_nodes: np.ndarray) -> np.ndarray:
    """The previous implementation: every link examined at every level."""
    n_dst, n_nodes = dst_nodes.size, len(links.fabric.node_names)
    rows = np.arange(n_dst)
    dist = np.full((n_dst, n_nodes), -1, dtype=np.int32)
    dist[rows, dst_nodes] = 0
    frontier = np.zeros((n_dst, n_nodes), dtype=bool)
    frontier[rows, dst_nodes] = True
    level, starts = 0, links.seg[links.sources]
    while frontier.any():
        level += 1
        reached = np.logical_or.reduceat(frontier[:, links.dst], starts, axis=1)
        new = reached & (dist[:, links.sources] < 0)
        sub = dist[:, links.sources]
        sub[new] = level
        dist[:, links.sources] = sub
        frontier[:] = False
        frontier[:, links.sources] = new & ~links.is_gpu[links.sources]
    return dist


def _dense_ranks(hops: NextHops, row: np.ndarray, node: np.ndarray, k: np.ndarray
                 ) -> tuple[np.ndarray, np.ndarray]:
    """(count of every (row, node), pick of the k-th link where the count is > k), from a
    running count of ok links, as before."""
    before = np.zeros((hops.ok.shape[0], hops.n_links + 1), dtype=np.int64)
    np.cumsum(hops.ok, axis=1, out=before[:, 1:])
    row_base = np.concatenate(([0], np.cumsum(before[:, -1])[:-1]))
    seg = hops.links.seg
    count = before[row, seg[node + 1]] - before[row, seg[node]]
    has = count > k
    rank = row_base[row[has]] + before[row[has], seg[node[has]]] + k[has]
    return count, hops.links.order[hops.flat[rank] - row[has] * hops.n_links]


def _check(graph: object) -> None:
    fab = fabric_for(graph, "H100", False)  # type: ignore[arg-type]
    links = LinkOrder(fab)
    rng = np.random.default_rng(len(fab.node_names))
    dst = fab.gpu_nodes[rng.choice(fab.n_gpus, min(fab.n_gpus, 9), replace=False)]
    dist = links.distances(dst)
    assert np.array_equal(dist, _dense_distances(links, dst))
    hops = NextHops(links, dist, dst)
    row, node = (a.ravel() for a in np.meshgrid(np.arange(dst.size),
                                                 np.arange(len(fab.node_names)), indexing="ij"))
    count, _ = _dense_ranks(hops, row, node, np.zeros_like(row))
    assert np.array_equal(hops.count(row, node), count)  # every (destination, node)
    k = (rng.random(row.size) * count).astype(np.int64)  # a random rank below each count
    _, picked = _dense_ranks(hops, row, node, k)
    has = count > k
    assert has.sum() > 20  # the picks are exercised
    assert np.array_equal(hops.pick(row[has], node[has], k[has]), picked)


@pytest.mark.parametrize("preset", PRESETS)
def test_sparse_search_equals_dense(preset: str) -> None:
    _check(topologies.load_preset(preset))


def test_cut_fabric_keeps_unreachable_nodes_at_minus_one() -> None:
    graph = topologies.load_preset("rail-h100-64").copy()
    nic = next(n for n, d in graph.nodes(data=True) if d.get("kind") == "nic")
    for u, v in list(graph.in_edges(nic)) + list(graph.out_edges(nic)):
        graph.remove_edge(u, v)
    _check(graph)
