"""Link faults: degrade a link's bandwidth or take it down, then check GPU reachability.

A fault is a mapping ``{"link": (u, v), "kind": "degrade", "factor": 0.5}`` (both
directions keep ``factor`` of their bandwidth, 0 < factor <= 1) or
``{"link": (u, v), "kind": "down"}`` (both directed edges removed). After the faults, every
pair of GPUs that could reach each other before without transiting another GPU must still
do so; otherwise :class:`~moesim.topologies.errors.TopologyError` names the first down link that
cut them apart. (Pairs that were never connected, e.g. different planes of a multi-plane
fat tree without PXN, are not held against the faults.)
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from moesim.topologies.errors import TopologyError
from moesim.topologies.summary import gpu_nodes

if TYPE_CHECKING:
    import networkx as nx

FAULT_KINDS = ("degrade", "down")


def _link(graph: nx.DiGraph, fault: Mapping[str, Any], field: str) -> tuple[str, str]:
    link = fault.get("link")
    if not isinstance(link, Sequence) or isinstance(link, str) or len(link) != 2:
        raise TopologyError(f"{field}.link", f"must be a pair [u, v] of node names, got {link!r}")
    u, v = link
    if not (graph.has_edge(u, v) and graph.has_edge(v, u)):
        raise TopologyError(f"{field}.link", f"no link {u} <-> {v} in {graph.graph.get('name')!r}")
    return u, v


def _check_fault(fault: object, field: str) -> Mapping[str, Any]:
    if not isinstance(fault, Mapping):
        raise TopologyError(field, f"must be a mapping with link and kind, got {fault!r}")
    allowed = {"link", "kind"} | ({"factor"} if fault.get("kind") == "degrade" else set())
    for key in fault:
        if key not in allowed:
            raise TopologyError(f"{field}.{key}", f"unknown key; allowed: {', '.join(allowed)}")
    if fault.get("kind") not in FAULT_KINDS:
        raise TopologyError(f"{field}.kind",
                            f"unknown {fault.get('kind')!r}; allowed: {', '.join(FAULT_KINDS)}")
    return fault


def _factor(value: object, field: str) -> float:
    ok = isinstance(value, int | float) and not isinstance(value, bool)
    if not ok or not 0 < float(value) <= 1:  # type: ignore[arg-type]
        raise TopologyError(field, f"must be a number in (0, 1], got {value!r}")
    return float(value)  # type: ignore[arg-type]


def _touches(graph: nx.DiGraph, gpus: list[str]) -> list[set[int]]:
    """Per GPU, the ids of the non-GPU components (links are duplex) it is adjacent to."""
    import networkx as nx

    kind = graph.nodes.data("kind")
    others = nx.Graph()
    others.add_nodes_from(n for n, k in kind if k != "gpu")
    others.add_edges_from((u, v) for u, v in graph.edges if kind[u] != "gpu" != kind[v])
    comp_of = {n: c for c, nodes in enumerate(nx.connected_components(others)) for n in nodes}
    return [{comp_of[n] for n in graph.successors(gpu) if n in comp_of} for gpu in gpus]


def lost_pair(before: nx.DiGraph, after: nx.DiGraph) -> tuple[str, str] | None:
    """Two GPUs that reach each other in ``before`` but not in ``after`` (``after`` must
    be ``before`` minus some edges), never transiting a GPU; None if there is no such pair."""
    gpus = gpu_nodes(before)
    tb, ta = _touches(before, gpus), _touches(after, gpus)
    members_before: dict[int, list[int]] = {}
    members_after: dict[int, list[int]] = {}
    for i in range(len(gpus)):
        for c in tb[i]:
            members_before.setdefault(c, []).append(i)
        for c in ta[i]:
            members_after.setdefault(c, []).append(i)
    for group in members_before.values():
        if set.intersection(*(ta[i] for i in group)):
            continue  # one surviving component still joins the whole group
        in_group = np.zeros(len(gpus), dtype=bool)
        in_group[group] = True
        for a in group:
            reach = np.zeros(len(gpus), dtype=bool)
            for c in ta[a]:
                reach[members_after[c]] = True
            missing = np.flatnonzero(in_group & ~reach)
            missing = missing[missing != a]
            if missing.size:
                return gpus[a], gpus[int(missing[0])]
    return None


def apply_faults(graph: nx.DiGraph, faults: Iterable[Mapping[str, Any]]) -> nx.DiGraph:
    """A new graph with ``faults`` applied; raises if a down link disconnects two GPUs.

    >>> from moesim.topologies.rail import rail_fat_tree
    >>> g = rail_fat_tree(4, hosts_per_su=4)
    >>> h = apply_faults(g, [{"link": ("leaf.r0.su0", "spine.0"), "kind": "degrade",
    ...                       "factor": 0.5}])
    >>> g.edges["spine.0", "leaf.r0.su0"]["bw_GBps"], h.edges["spine.0", "leaf.r0.su0"]["bw_GBps"]
    (200.0, 100.0)
    """
    out = graph.copy()
    downs: list[tuple[str, str, str]] = []
    for i, raw in enumerate(faults):
        fault = _check_fault(raw, f"faults[{i}]")
        u, v = _link(out, fault, f"faults[{i}]")
        if fault["kind"] == "down":
            out.remove_edges_from([(u, v), (v, u)])
            downs.append((f"faults[{i}].link", u, v))
            continue
        factor = _factor(fault.get("factor"), f"faults[{i}].factor")
        for a, b in ((u, v), (v, u)):
            out.edges[a, b]["bw_GBps"] *= factor
    if downs:
        _check_connected(graph, out, downs)
    return out


def _check_connected(
    before: nx.DiGraph, after: nx.DiGraph, downs: list[tuple[str, str, str]]
) -> None:
    import networkx as nx

    if lost_pair(before, after) is None:
        return
    removed: list[tuple[str, str]] = []
    for field, u, v in downs:
        removed += [(u, v), (v, u)]
        pair = lost_pair(before, nx.restricted_view(before, [], removed))
        if pair is not None:
            raise TopologyError(field, f"taking down {u} <-> {v} disconnects GPU {pair[0]} "
                                       f"from {pair[1]}")
