"""Counting what a fabric graph holds: GPUs, switches, links, bisection, path diversity.

``bisection_GBps`` is defined here as the maximum flow, one direction, from the first half
of the GPUs (global index order) to the second half, every link counting (NVLink too).
Global order is host-major and SU/pod-major, so this is the locality-aligned bisection; for
the regular Clos fabrics built here it is their minimum bisection (closed forms pinned in
tests: k-ary fat tree k^3/8 x link bw; two-tier rail with an even number of full SUs
N/2 x NIC bw / oversubscription).
"""

from __future__ import annotations

from collections import Counter, deque
from typing import TYPE_CHECKING, Any

from moesim.topologies._graph import SWITCH_TIER, ports
from moesim.topologies.errors import TopologyError

if TYPE_CHECKING:
    import networkx as nx

SCALE_OUT_TIERS = ("nic", "leaf_spine", "spine_core")


def gpu_nodes(graph: nx.DiGraph) -> list[str]:
    """GPU node names sorted by global GPU index."""
    gpus = [(d["gpu"], n) for n, d in graph.nodes(data=True) if d.get("kind") == "gpu"]
    return [n for _, n in sorted(gpus)]


def _resolve_gpu(graph: nx.DiGraph, gpu: int | str, field: str) -> str:
    if isinstance(gpu, str):
        if graph.nodes.get(gpu, {}).get("kind") == "gpu":
            return gpu
    else:
        for n, d in graph.nodes(data=True):
            if d.get("kind") == "gpu" and d["gpu"] == gpu:
                return str(n)
    raise TopologyError(field, f"no GPU {gpu!r} in fabric {graph.graph.get('name')!r}")


def equal_cost_paths(graph: nx.DiGraph, src_gpu: int | str, dst_gpu: int | str) -> int:
    """Number of shortest (fewest-hop) paths src -> dst that transit no other GPU.

    GPUs may be given by global index or node name; 0 when no such path exists.
    """
    src = _resolve_gpu(graph, src_gpu, "src_gpu")
    dst = _resolve_gpu(graph, dst_gpu, "dst_gpu")
    if src == dst:
        return 1
    dist, count = {src: 0}, {src: 1}
    queue = deque([src])
    while queue:
        u = queue.popleft()
        if u == dst or (u != src and graph.nodes[u].get("kind") == "gpu"):
            continue
        for v in graph.successors(u):
            if v not in dist:
                dist[v], count[v] = dist[u] + 1, 0
                queue.append(v)
            if dist[v] == dist[u] + 1:
                count[v] += count[u]
    return count.get(dst, 0)


def bisection_GBps(graph: nx.DiGraph) -> float:
    """Max flow (GB/s, one direction) from the first half of the GPUs to the second half."""
    import networkx as nx

    gpus = gpu_nodes(graph)
    half = len(gpus) // 2
    if half == 0:
        return 0.0
    flow = nx.DiGraph()
    flow.add_edges_from((u, v, {"c": d["bw_GBps"]}) for u, v, d in graph.edges(data=True))
    source, sink = ("__source__",), ("__sink__",)
    flow.add_edges_from((source, g) for g in gpus[:half])
    flow.add_edges_from((g, sink) for g in gpus[half : 2 * half])
    return float(nx.maximum_flow_value(flow, source, sink, capacity="c"))


def _oversubscription(graph: nx.DiGraph) -> dict[str, float]:
    """Per switch kind: bandwidth arriving from below / bandwidth leaving upwards."""
    down: Counter[str] = Counter()
    up: Counter[str] = Counter()
    for u, v, d in graph.edges(data=True):
        ku, kv = graph.nodes[u]["kind"], graph.nodes[v]["kind"]
        if kv in ("leaf", "spine", "core") and (ku == "nic" or SWITCH_TIER.get(ku, 9) <
                                                 SWITCH_TIER[kv]):
            down[kv] += d["bw_GBps"]
        if ku in ("leaf", "spine") and SWITCH_TIER.get(kv, -1) > SWITCH_TIER[ku]:
            up[ku] += d["bw_GBps"]
    return {kind: down[kind] / up[kind] for kind in ("leaf", "spine") if up[kind] > 0}


def summarize(graph: nx.DiGraph, bisection: bool = True) -> dict[str, Any]:
    """Counts per tier, bisection bandwidth (GB/s) and oversubscription of a fabric.

    ``links`` counts full-duplex links (two directed edges each); ``cables`` counts the
    physical ports of ``port_bw_GBps`` that the aggregated scale-out links stand for.
    ``bisection=False`` skips the max-flow (about a second at 4096 GPUs).
    """
    kinds = Counter(d["kind"] for _, d in graph.nodes(data=True))
    gpus = [d for _, d in graph.nodes(data=True) if d["kind"] == "gpu"]
    links: Counter[str] = Counter()
    bw: Counter[str] = Counter()
    cables: Counter[str] = Counter()
    port_bw = float(graph.graph.get("port_bw_GBps", 50.0))
    for u, v, d in graph.edges(data=True):
        if str(u) < str(v) or not graph.has_edge(v, u):
            links[d["tier"]] += 1
            bw[d["tier"]] += d["bw_GBps"]
            if d["tier"] in SCALE_OUT_TIERS:
                cables[d["tier"]] += ports(d["bw_GBps"], port_bw)
    return {
        "name": graph.graph.get("name"),
        "family": graph.graph.get("family"),
        "fabric": graph.graph.get("fabric"),
        "gpus": len(gpus),
        "hosts": len({d["host"] for d in gpus}),
        "nvlink_domain_size": graph.graph.get("nvlink_domain_size"),
        "nvlink_domains": len({d["domain"] for d in gpus}),
        "nics": kinds["nic"],
        "switches": {k: kinds[k] for k in SWITCH_TIER if kinds[k]},
        "links": dict(links),
        "cables": dict(cables),
        "link_bw_GBps": dict(bw),
        "bisection_GBps": bisection_GBps(graph) if bisection else None,
        "oversubscription": _oversubscription(graph),
    }
