"""GPU attributes a placement needs, indexed once per (fabric, first GPU, world size).

For each switch tier level, which connected component of the GPU-free fabric each GPU
touches (see :mod:`moesim.parallel.placement` for how spans follow from that), plus each GPU's host,
NVLink domain and per-link-class bandwidth. Building it walks the graph; placing many
layouts on one fabric should reuse one index.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from moesim.errors import ConfigError

if TYPE_CHECKING:
    import networkx as nx

LINK_CLASSES = ("nvlink", "pcie", "nic", "leaf_spine", "spine_core")
LEVELS = (0, 1, 2, 3)  # switch tiers: nvswitch 0, leaf 1, spine 2, core 3


@dataclass(frozen=True)
class IndexedFabric:
    """Per-GPU view of a fabric graph, GPUs by global index."""

    reach: tuple[tuple[frozenset[int], ...], ...]  # [level][gpu] -> adjacent component ids
    forwarded_reach: tuple[tuple[frozenset[int], ...], ...]  # the same, PXN through a peer
    pattern: tuple[int, ...]  # [gpu] -> id of (reach, forwarded_reach) over all levels
    host: np.ndarray
    domain: np.ndarray
    class_bw_GBps: dict[str, np.ndarray]


def _components(graph: nx.DiGraph) -> list[dict[str, int]]:
    """Per level, component id of every non-GPU node of tier <= level (NICs count as -1)."""
    import networkx as nx

    others = nx.Graph()
    tiers = {n: d.get("tier", -1) for n, d in graph.nodes(data=True) if d.get("kind") != "gpu"}
    others.add_nodes_from(tiers)
    others.add_edges_from((u, v) for u, v in graph.edges() if u in tiers and v in tiers)
    out = []
    for level in LEVELS:
        view = others.subgraph([n for n, t in tiers.items() if t <= level])
        out.append({n: c for c, comp in enumerate(nx.connected_components(view)) for n in comp})
    return out


def _reach(graph: nx.DiGraph, gpus: list[str]) -> tuple[tuple[frozenset[int], ...], ...]:
    """Per level and GPU, the components it touches that also touch another GPU."""
    levels = []
    for comp in _components(graph):
        touched = [frozenset(comp[v] for v in graph.successors(g) if v in comp) for g in gpus]
        count: dict[int, int] = {}
        for cs in touched:
            for c in cs:
                count[c] = count.get(c, 0) + 1
        levels.append(tuple(frozenset(c for c in cs if count[c] > 1) for cs in touched))
    return tuple(levels)


def _tier_sums(graph: nx.DiGraph) -> tuple[dict[tuple[str, str], float],
                                             dict[tuple[str, str], float]]:
    """Total bandwidth leaving and entering each node, per link class (one pass)."""
    out: dict[tuple[str, str], float] = {}
    into: dict[tuple[str, str], float] = {}
    for u, v, d in graph.edges(data=True):
        key_out, key_in = (u, d.get("tier", "")), (v, d.get("tier", ""))
        out[key_out] = out.get(key_out, 0.0) + d["bw_GBps"]
        into[key_in] = into.get(key_in, 0.0) + d["bw_GBps"]
    return out, into


def _leaf_shares(graph: nx.DiGraph) -> dict[str, tuple[float, float]]:
    """Per leaf, (leaf_spine, spine_core) bandwidth per unit of NIC bandwidth below it."""
    out, into = _tier_sums(graph)

    def ratio(node: str, up: str, down: str) -> float:
        below = into.get((node, down), 0.0)
        return out.get((node, up), 0.0) / below if below > 0 else 0.0

    shares = {}
    for leaf, kind in graph.nodes.data("kind"):
        if kind != "leaf":
            continue
        down = into.get((leaf, "nic"), 0.0) or 1.0
        core = sum(d["bw_GBps"] * ratio(s, "spine_core", "leaf_spine")
                   for s, d in graph[leaf].items() if d.get("tier") == "leaf_spine")
        shares[leaf] = (out.get((leaf, "leaf_spine"), 0.0) / down, core / down)
    return shares


def _class_bw(graph: nx.DiGraph, gpu: str,
              leaves: dict[str, tuple[float, float]]) -> dict[str, float]:
    """Per-GPU bandwidth (GB/s, one direction) of each link class, see module docstring."""
    bw = dict.fromkeys(LINK_CLASSES, 0.0)
    for nic, link in graph[gpu].items():
        if link.get("tier") in ("nvlink", "pcie"):
            bw[link["tier"]] += link["bw_GBps"]
        if link.get("tier") != "pcie":
            continue
        share = 1.0 / sum(graph.nodes[v].get("kind") == "gpu" for v in graph.successors(nic))
        for leaf, up in graph[nic].items():
            if up.get("tier") == "nic":
                rate = share * up["bw_GBps"]
                spine, core = leaves.get(leaf, (0.0, 0.0))
                bw["nic"] += rate
                bw["leaf_spine"] += rate * spine
                bw["spine_core"] += rate * core
    return bw


def index_fabric(graph: nx.DiGraph, first_gpu: int, world: int) -> IndexedFabric:
    by_index = {d["gpu"]: n for n, d in graph.nodes(data=True) if d.get("kind") == "gpu"}
    if world + first_gpu > len(by_index):
        offset = f" from GPU {first_gpu}" if first_gpu else ""
        raise ConfigError("layout", f"needs {world} GPUs{offset}, fabric "
                          f"{graph.graph.get('name', '')!r} has {len(by_index)}")
    missing = [i for i in range(first_gpu, first_gpu + world) if i not in by_index]
    if missing:
        raise ConfigError("layout", f"rank {missing[0] - first_gpu} maps to GPU {missing[0]}, "
                          "which the fabric lacks")
    gpus = [by_index[i] for i in range(first_gpu, first_gpu + world)]
    leaves = _leaf_shares(graph)
    per_gpu = [_class_bw(graph, g, leaves) for g in gpus]
    domain = [graph.nodes[g]["domain"] for g in gpus]
    reach = _reach(graph, gpus)
    forwarded = _forwarded_reach(reach, domain)
    ids: dict[tuple[frozenset[int], ...], int] = {}
    pattern = tuple(ids.setdefault(tuple(lv[i] for lv in reach + forwarded), len(ids))
                    for i in range(world))
    return IndexedFabric(
        reach=reach, forwarded_reach=forwarded, pattern=pattern,
        host=np.array([graph.nodes[g]["host"] for g in gpus]), domain=np.array(domain),
        class_bw_GBps={c: np.array([b[c] for b in per_gpu]) for c in LINK_CLASSES},
    )


def _forwarded_reach(
    reach: tuple[tuple[frozenset[int], ...], ...], domain: list[int],
) -> tuple[tuple[frozenset[int], ...], ...]:
    """Reach when a GPU may forward through any GPU of its NVLink domain (PXN)."""
    out = []
    for sets in reach:
        by_domain: dict[int, frozenset[int]] = {}
        for d, cs in zip(domain, sets, strict=True):
            by_domain[d] = by_domain.get(d, frozenset()) | cs
        out.append(tuple(by_domain[d] for d in domain))
    return tuple(out)
