"""A fabric graph as the builders write it, kept as lists and arrays: no networkx.

The builders (:mod:`moesim.topologies.rail`, ``hgx``, ``nvl72``, ``mpft``, ``fat_tree``)
write into a :class:`LinkGraph`: nodes with their attribute dicts, full-duplex links as
``(u, v, bw_GBps, latency_ns, tier)`` rows, graph attributes. The public builders return
:meth:`LinkGraph.to_networkx` (the graph networkx would have built from the same calls: nodes,
edges, attributes and their order); the simulator's fast path reads the lists straight into
its link arrays (:func:`moesim.engine.fabric.link_table`), so that ``moesim step`` does not
import networkx at all (0.18 s) nor build its dict-of-dicts (0.2 s at 9,216 GPUs).

Read access follows networkx.DiGraph where the simulator uses it (``graph``, ``nodes[n]``,
``nodes(data=True)``, ``edges(data=True)``, ``edges[u, v]``, ``adjacency()``, ``successors``,
``subgraph``, ``number_of_nodes/edges``); anything else goes through ``to_networkx()``.
Directed links are ordered as networkx orders them: by source node (node order), then in the
order they were added.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from functools import cached_property, wraps
from inspect import signature
from typing import TYPE_CHECKING, Any, ParamSpec

import numpy as np

if TYPE_CHECKING:
    import networkx as nx

Link = tuple[str, str, float, float, str]
"""(u, v, bw_GBps, latency_ns, tier): one full-duplex link, two directed edges."""
EDGE_KEYS = ("bw_GBps", "latency_ns", "tier")


class NodeView:
    """``LinkGraph.nodes``: node names in order; ``[n]`` is n's attribute dict."""

    def __init__(self, attrs: dict[str, dict[str, Any]]) -> None:
        self._attrs = attrs

    def __iter__(self) -> Iterator[str]:
        return iter(self._attrs)

    def __len__(self) -> int:
        return len(self._attrs)

    def __contains__(self, node: object) -> bool:
        return node in self._attrs

    def __getitem__(self, node: str) -> dict[str, Any]:
        return self._attrs[node]

    def get(self, node: str, default: Any = None) -> Any:
        return self._attrs.get(node, default)

    def __call__(self, data: bool | str = False, default: Any = None) -> Iterator[Any]:
        if data is False:
            return iter(self._attrs)
        if data is True:
            return iter(self._attrs.items())
        return ((n, d.get(data, default)) for n, d in self._attrs.items())

    def data(self, key: bool | str = True, default: Any = None) -> Iterator[Any]:
        return self(key, default)


class EdgeView:
    """``LinkGraph.edges``: ``(data=True)`` iterates (u, v, attributes) in link order;
    ``[u, v]`` is the attribute dict of link u -> v (a fresh dict)."""

    def __init__(self, graph: LinkGraph) -> None:
        self._g = graph

    def __call__(self, data: bool = False) -> Iterator[Any]:
        g = self._g
        names, cols = g.names, g.columns
        for i, (a, b) in enumerate(zip(cols.src.tolist(), cols.dst.tolist(), strict=True)):
            if data:
                yield names[a], names[b], cols.data(i)
            else:
                yield names[a], names[b]

    def __iter__(self) -> Iterator[Any]:
        return self()

    def __len__(self) -> int:
        return int(self._g.columns.src.size)

    def __getitem__(self, edge: tuple[str, str]) -> dict[str, Any]:
        return self._g.columns.data(self._g.link_id(*edge))


class LinkColumns:
    """Directed links in networkx's order: node indices and the attribute values as given."""

    def __init__(self, src: np.ndarray, dst: np.ndarray, values: tuple[list[Any], ...]) -> None:
        self.src, self.dst = src, dst
        self.bw_GBps, self.latency_ns, self.tier = values

    def data(self, i: int) -> dict[str, Any]:
        return {"bw_GBps": self.bw_GBps[i], "latency_ns": self.latency_ns[i],
                "tier": self.tier[i]}


class LinkGraph:
    """A directed fabric graph written by the builders (module docstring)."""

    def __init__(self, **attrs: Any) -> None:
        self.graph: dict[str, Any] = dict(attrs)
        self._attrs: dict[str, dict[str, Any]] = {}
        self._rows: list[Link] = []  # full-duplex links (``_duplex``) or directed edges
        self._duplex = True
        self._pick: tuple[LinkGraph, np.ndarray] | None = None  # a subgraph's links, unread
        self.nodes = NodeView(self._attrs)
        self.edges = EdgeView(self)

    # -- writing (the builders' calls) -------------------------------------------------------
    def add_node(self, node: str, **attrs: Any) -> None:
        self._changed()
        self._attrs.setdefault(node, {}).update(attrs)

    def add_nodes_from(self, nodes: Iterable[tuple[str, dict[str, Any]]]) -> None:
        self._changed()
        for node, attrs in nodes:
            self._attrs.setdefault(node, {}).update(attrs)

    def add_links(self, links: Iterable[Link]) -> None:
        """Full-duplex links, each u -> v then v -> u; unknown endpoints become nodes in the
        order networkx's ``add_edges_from`` would add them."""
        self._changed()
        new = list(links)
        attrs = self._attrs
        if not {n for link in new for n in link[:2]} <= attrs.keys():
            for u, v, *_ in new:
                attrs.setdefault(u, {})
                attrs.setdefault(v, {})
        self._rows += new

    def _changed(self) -> None:
        if not self._duplex:
            raise TypeError("a LinkGraph subgraph is read-only")
        for cached in ("names", "index", "columns"):
            self.__dict__.pop(cached, None)

    def _read_pick(self) -> None:
        """A subgraph's links (:meth:`subgraph`) as its directed rows, on first use."""
        if self._pick is None:
            return
        parent, links = self._pick
        names, cols = parent.names, parent.columns
        self._rows = [(names[int(cols.src[i])], names[int(cols.dst[i])], cols.bw_GBps[i],
                       cols.latency_ns[i], cols.tier[i]) for i in links.tolist()]
        self._pick = None

    def _directed(self) -> Iterator[Link]:
        """Every directed edge in the order it was added."""
        self._read_pick()
        if not self._duplex:
            return iter(self._rows)
        return (edge for u, v, bw, lat, tier in self._rows
                for edge in ((u, v, bw, lat, tier), (v, u, bw, lat, tier)))

    # -- reading -----------------------------------------------------------------------------
    @cached_property
    def names(self) -> tuple[str, ...]:
        return tuple(self._attrs)

    @cached_property
    def index(self) -> dict[str, int]:
        return {n: i for i, n in enumerate(self._attrs)}

    @cached_property
    def columns(self) -> LinkColumns:
        """The directed links in networkx's order (:class:`LinkColumns`). A link added again
        keeps its first place and takes the later attributes, as networkx does."""
        self._read_pick()
        index, rows = self.index, self._rows
        u = np.array([index[row[0]] for row in rows], dtype=np.int64)
        v = np.array([index[row[1]] for row in rows], dtype=np.int64)
        if self._duplex:
            src, dst = np.stack([u, v], axis=1).ravel(), np.stack([v, u], axis=1).ravel()
            row = np.repeat(np.arange(len(rows)), 2)
        else:
            src, dst, row = u, v, np.arange(len(rows))
        order = np.argsort(src, kind="stable")
        _, first, inverse = np.unique(src * max(1, len(index)) + dst, return_index=True,
                                      return_inverse=True)
        if first.size < src.size:  # repeated links: first place, last attributes
            last = np.zeros(first.size, dtype=np.int64)
            np.maximum.at(last, inverse, np.arange(src.size))
            keep = np.zeros(src.size, dtype=bool)
            keep[first] = True
            order = order[keep[order]]
            row = row[last[inverse]]
        picked = row[order].tolist()
        values = tuple([rows[r][col] for r in picked] for col in (2, 3, 4))
        return LinkColumns(src[order], dst[order], values)

    def link_id(self, u: str, v: str) -> int:
        """Position of link u -> v in :attr:`columns` (KeyError if absent)."""
        cols, index = self.columns, self.index
        hit = np.flatnonzero((cols.src == index[u]) & (cols.dst == index[v]))
        if not hit.size:
            raise KeyError((u, v))
        return int(hit[0])

    def number_of_nodes(self) -> int:
        return len(self._attrs)

    def number_of_edges(self) -> int:
        return int(self.columns.src.size)

    def has_edge(self, u: str, v: str) -> bool:
        try:
            self.link_id(u, v)
        except KeyError:
            return False
        return True

    def adjacency(self) -> Iterator[tuple[str, dict[str, dict[str, Any]]]]:
        names = self.names
        succ: dict[str, dict[str, dict[str, Any]]] = {n: {} for n in names}
        cols = self.columns
        for i, (a, b) in enumerate(zip(cols.src.tolist(), cols.dst.tolist(), strict=True)):
            succ[names[a]][names[b]] = cols.data(i)
        return iter(succ.items())

    def __getitem__(self, node: str) -> dict[str, dict[str, Any]]:
        cols, names = self.columns, self.names
        out = np.flatnonzero(cols.src == self.index[node]).tolist()
        return {names[int(cols.dst[i])]: cols.data(i) for i in out}

    def successors(self, node: str) -> Iterator[str]:
        return iter(self[node])

    def subgraph(self, nodes: Iterable[str]) -> LinkGraph:
        """The nodes ``nodes`` (in this graph's order; attribute dicts shared, as a networkx
        subgraph view shares them) and the links between them (read when first asked): a
        new, read-only graph."""
        keep = np.zeros(len(self._attrs), dtype=bool)
        keep[np.array([self.index[n] for n in nodes], dtype=np.int64)] = True
        names, cols = self.names, self.columns
        out = LinkGraph(**self.graph)
        out._attrs.update((names[i], self._attrs[names[i]]) for i in np.flatnonzero(keep))
        out._duplex = False
        out._pick = (self, np.flatnonzero(keep[cols.src] & keep[cols.dst]))
        return out

    def to_networkx(self) -> nx.DiGraph:
        """The networkx.DiGraph the same builder calls would have made (imports networkx)."""
        import networkx as nx

        g = nx.DiGraph(**self.graph)
        g.add_nodes_from((n, dict(d)) for n, d in self._attrs.items())
        g.add_edges_from((u, v, {"bw_GBps": bw, "latency_ns": lat, "tier": tier})
                         for u, v, bw, lat, tier in self._directed())
        return g


P = ParamSpec("P")


def graph_builder(table_builder: Callable[P, LinkGraph], name: str) -> Callable[P, nx.DiGraph]:
    """The networkx form of a topology builder: the same parameters, checks and docstring as
    ``table_builder`` (which returns a :class:`LinkGraph`), the graph as ``to_networkx()``."""

    @wraps(table_builder)
    def build(*args: P.args, **kwargs: P.kwargs) -> nx.DiGraph:
        return table_builder(*args, **kwargs).to_networkx()

    build.__name__ = build.__qualname__ = name
    build.__signature__ = signature(table_builder).replace(  # type: ignore[attr-defined]
        return_annotation="nx.DiGraph")
    return build
