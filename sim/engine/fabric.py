"""A fabric: the directed links of a networkx graph as arrays the engine indexes.

The engine knows nodes only as typed graph nodes (``kind``) and links as
directed edges carrying ``bw_GBps`` (GB/s, one direction), ``latency_ns`` and a
``tier`` (link class). Endpoints are the nodes of kind ``gpu``, ordered by
their ``gpu`` attribute; everything MoE-shaped lives above the engine.

An optional per-tier *achievable fraction* derates line rate to what
collectives measure in practice (calibration constants live with the caller).

:class:`LinkTable` reads a graph's links into arrays once, so that the fabric of any node
subset (fast mode's sub-fabrics, :mod:`moesim.fabric.subfabric`) is a few numpy calls.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TypeAlias

import numpy as np

from moesim.errors import FabricError
from moesim.topologies.table import LinkGraph

if TYPE_CHECKING:
    import networkx as nx

    Graph: TypeAlias = nx.DiGraph | LinkGraph
    """A fabric graph: networkx's, or the builders' own (no networkx on the fast path)."""

GB = 1e9


@dataclass(frozen=True)
class Fabric:
    """Arrays over the links and nodes of one fabric graph (read-only)."""

    graph: Graph
    node_names: tuple[str, ...]
    node_kind: np.ndarray  # str per node
    link_src: np.ndarray  # node index per link
    link_dst: np.ndarray
    cap_Bps: np.ndarray  # achievable capacity, bytes/s, one direction
    line_Bps: np.ndarray  # line rate before derating
    latency_s: np.ndarray
    tier: np.ndarray  # str per link
    gpu_nodes: np.ndarray  # node index of GPU g (g = the node's ``gpu`` attribute)
    node_index: dict[str, int] = field(repr=False, compare=False)
    _link_index: dict[tuple[int, int], int] = field(repr=False, compare=False)
    n_links: int = field(init=False)  # directed links: the arrays' length, counted once
    n_gpus: int = field(init=False)  # GPU endpoints: len(gpu_nodes)

    def __post_init__(self) -> None:
        object.__setattr__(self, "n_links", int(self.link_src.shape[0]))
        object.__setattr__(self, "n_gpus", int(self.gpu_nodes.shape[0]))

    def link_id(self, u: str, v: str) -> int:
        """Index of the directed link u -> v (by node name)."""
        try:
            return self._link_index[(self.node_index[u], self.node_index[v])]
        except KeyError as exc:
            raise FabricError(f"no link {u} -> {v} in fabric") from exc

    def link_name(self, link: int) -> str:
        return f"{self.node_names[self.link_src[link]]}->{self.node_names[self.link_dst[link]]}"

    def gpu_name(self, gpu: int) -> str:
        return self.node_names[self.gpu_nodes[gpu]]


def fabric_from_graph(
    graph: Graph, achievable_fraction: Mapping[str, float] | None = None
) -> Fabric:
    """Index ``graph``'s links; derate each tier by ``achievable_fraction[tier]``."""
    return fabric_from_table(link_table(graph), achievable_fraction)


def fabric_from_table(
    table: LinkTable, achievable_fraction: Mapping[str, float] | None = None
) -> Fabric:
    """:func:`fabric_from_graph` of the graph ``table`` was read from."""
    graph = table.graph
    links = np.arange(table.src.size)
    if not links.size:
        raise FabricError("fabric has no links")
    table.check(links)
    gpus = sorted((int(graph.nodes[n]["gpu"]), i) for i, n in enumerate(graph.nodes)
                  if table.kinds[i] == "gpu")
    if [g for g, _ in gpus] != list(range(len(gpus))):
        raise FabricError("gpu nodes must carry distinct 'gpu' indices 0..N-1")
    return table.build(links, np.ones(len(table.names), dtype=bool),
                       np.array([n for _, n in gpus], dtype=np.int64), achievable_fraction, graph)


def fabric_from_arrays(
    graph: Graph, names: tuple[str, ...], kinds: np.ndarray, src: np.ndarray,
    dst: np.ndarray, line_Bps: np.ndarray, latency_s: np.ndarray, tier: np.ndarray,
    gpu_nodes: np.ndarray, achievable_fraction: Mapping[str, float] | None = None,
) -> Fabric:
    """A :class:`Fabric` from checked arrays (:func:`fabric_from_graph`'s last step)."""
    frac = np.array([(achievable_fraction or {}).get(t, 1.0) for t in tier])
    link_index = {(a, b): i for i, (a, b) in enumerate(zip(src.tolist(), dst.tolist(),
                                                           strict=True))}
    return Fabric(
        graph=graph,
        node_names=names,
        node_kind=kinds,
        link_src=src,
        link_dst=dst,
        cap_Bps=line_Bps * frac,
        line_Bps=line_Bps,
        latency_s=latency_s,
        tier=tier,
        gpu_nodes=gpu_nodes,
        node_index={n: i for i, n in enumerate(names)},
        _link_index=link_index,
    )


_ABSENT = object()


@dataclass(frozen=True)
class LinkTable:
    """A graph's nodes and directed links as arrays (``graph.nodes`` / ``graph.edges`` order),
    read once, so that the fabric of any node subset is a few numpy calls (:meth:`fabric`).
    As in :func:`fabric_from_graph`, link attributes are checked only for the links a fabric
    takes."""

    graph: Graph
    names: tuple[str, ...]
    kinds: np.ndarray  # str per node
    src: np.ndarray  # node index per link
    dst: np.ndarray
    attr: np.ndarray  # [link, (bw_GBps, latency_ns)], 0 where not an int or float
    typed: np.ndarray  # [link, (bw_GBps, latency_ns)]: the attribute is an int or float
    tier: np.ndarray  # str per link, "link" where absent
    tier_key: np.ndarray  # str(the tier attribute) per link, "None" where absent

    def within(self, keep: np.ndarray) -> np.ndarray:
        """Ids (ascending) of the links between two nodes of the ``keep`` mask."""
        return np.flatnonzero(keep[self.src] & keep[self.dst])

    def fabric(self, keep: np.ndarray, gpu_nodes: np.ndarray,
               achievable_fraction: Mapping[str, float] | None, graph: Graph) -> Fabric:
        """The fabric of the nodes in the ``keep`` mask and the links between them, in this
        table's order; its GPU ``g`` is node ``gpu_nodes[g]`` (a node index of this table).
        ``graph`` becomes :attr:`Fabric.graph`."""
        links = self.within(keep)
        if not links.size:
            raise FabricError("fabric has no links")
        self.check(links)
        return self.build(links, keep, gpu_nodes, achievable_fraction, graph)

    def build(self, links: np.ndarray, keep: np.ndarray, gpu_nodes: np.ndarray,
              achievable_fraction: Mapping[str, float] | None, graph: Graph) -> Fabric:
        """:meth:`fabric` of ``links`` (those within ``keep``, already checked)."""
        local, kept = np.cumsum(keep) - 1, np.flatnonzero(keep)
        attr = self.attr[links]
        return fabric_from_arrays(
            graph, tuple(self.names[i] for i in kept.tolist()), self.kinds[kept],
            local[self.src[links]], local[self.dst[links]], attr[:, 0] * GB, attr[:, 1] * 1e-9,
            self.tier[links], local[gpu_nodes], achievable_fraction)

    def check(self, links: np.ndarray) -> None:
        """Raise :func:`_edge_attr`'s error for the first bad bandwidth of ``links``, then
        latency."""
        attr = self.attr[links]
        bad = ~self.typed[links] | (attr < 0)
        bad[:, 0] |= attr[:, 0] == 0
        for col, key in enumerate(("bw_GBps", "latency_ns")):
            hit = np.flatnonzero(bad[:, col])
            if hit.size:
                nodes = list(self.graph.nodes)
                u, v = nodes[self.src[links[hit[0]]]], nodes[self.dst[links[hit[0]]]]
                _edge_attr(u, v, self.graph.edges[u, v], key)


def link_table(graph: Graph) -> LinkTable:
    """Read ``graph`` into a :class:`LinkTable` (one pass over its edges)."""
    src: np.ndarray | tuple[int, ...]
    dst: np.ndarray | tuple[int, ...]
    if isinstance(graph, LinkGraph):  # its columns: no dict per link
        cols = graph.columns
        src, dst = cols.src, cols.dst
        bw, lat, tier = tuple(cols.bw_GBps), tuple(cols.latency_ns), tuple(cols.tier)
    else:
        index = {n: i for i, n in enumerate(graph.nodes)}
        rows = [(index[u], index[v], d.get("bw_GBps"), d.get("latency_ns"),
                 d.get("tier", _ABSENT)) for u, nbrs in graph.adjacency() for v, d in nbrs.items()]
        src, dst, bw, lat, tier = zip(*rows, strict=True) if rows else ((),) * 5
    attr, typed = zip(*(_numbers(col) for col in (bw, lat)), strict=True)
    if set(map(type, tier)) <= {str}:  # every tier a string (the builders'): as they are
        tier_arr = tier_key = np.array(tier, dtype=object)
    else:
        tier_arr = np.array(["link" if t is _ABSENT else str(t) for t in tier], dtype=object)
        tier_key = np.array(["None" if t is _ABSENT else str(t) for t in tier], dtype=object)
    return LinkTable(
        graph=graph, names=tuple(str(n) for n in graph.nodes),
        kinds=np.array([d.get("kind", "") for _, d in graph.nodes(data=True)], dtype=object),
        src=np.asarray(src, dtype=np.int64), dst=np.asarray(dst, dtype=np.int64),
        attr=np.stack(attr, axis=1), typed=np.stack(typed, axis=1),
        tier=tier_arr, tier_key=tier_key,
    )


def _numbers(values: tuple[object, ...]) -> tuple[np.ndarray, np.ndarray]:
    """(values as floats, 0 where not an int or float; which were)."""
    if set(map(type, values)) <= {int, float}:
        return np.array(values, dtype=np.float64), np.ones(len(values), dtype=bool)
    typed = np.array([isinstance(x, int | float) for x in values], dtype=bool)
    out = [float(x) if ok else 0.0 for x, ok in zip(values, typed, strict=True)]  # type: ignore[arg-type]
    return np.array(out, dtype=np.float64), typed


def _edge_attr(u: object, v: object, data: Mapping[str, object], key: str) -> float:
    value = data.get(key)
    if not isinstance(value, int | float) or value < 0 or (key == "bw_GBps" and value == 0):
        raise FabricError(f"link {u}->{v}: '{key}' must be a positive number, got {value!r}")
    return float(value)


def implied_links(fabric: Fabric) -> np.ndarray:
    """Links whose capacity constraint another link always implies (mask).

    Through a non-GPU node v with exactly two neighbours, every byte that
    enters from one leaves towards the other (routes never turn back), so
    u->v and v->w carry the same flows; the one with the larger capacity can
    never bind (ties: the link into v is kept). Redundant constraints do not
    change a max-min allocation, so the solver may skip these links
    (statistics still count them). An HGX NIC is such a node: its PCIe side
    is implied by its 400G side.
    """
    return implied_partner(fabric) >= 0


def load_links(fabric: Fabric) -> np.ndarray:
    """Per link, the link whose load it is counted as: its implied partner (the rate solver
    counts the two as one), else itself."""
    partner = implied_partner(fabric)
    return np.where(partner >= 0, partner, np.arange(partner.size))


def implied_partner(fabric: Fabric) -> np.ndarray:
    """Per link, the kept link that carries exactly the same flows, or -1 if it is kept."""
    n_nodes = len(fabric.node_names)
    src, dst, cap = fabric.link_src, fabric.link_dst, fabric.cap_Bps
    order = np.argsort(src, kind="stable")
    out_deg = np.bincount(src, minlength=n_nodes)
    first = np.concatenate(([0], np.cumsum(out_deg)[:-1]))
    relay = (out_deg == 2) & (np.bincount(dst, minlength=n_nodes) == 2)
    relay &= fabric.node_kind != "gpu"
    partner = np.full(fabric.n_links, -1, dtype=np.int64)
    for v in np.flatnonzero(relay).tolist():
        out_a, out_b = order[first[v]], order[first[v] + 1]
        for into, onward in ((fabric._link_index.get((int(dst[out_b]), v)), out_a),
                             (fabric._link_index.get((int(dst[out_a]), v)), out_b)):
            if into is None:
                continue
            if cap[onward] < cap[into]:
                partner[into] = onward
            else:
                partner[onward] = into
    for _ in range(fabric.n_links):  # a kept partner for chains of relays
        nxt = np.where(partner >= 0, partner[partner], -1)
        chained = (partner >= 0) & (nxt >= 0)
        if not chained.any():
            break
        partner[chained] = nxt[chained]
    return partner
