"""The part of a fabric that a few GPUs need: their hosts and the switches above them.

Fast mode (:mod:`sim.step.fast`) routes only the representative pipeline and its groups, but
the engine's router does one reverse breadth-first search per destination over the *whole*
graph (about 0.5 s for the 4,032 pairs of a 64-GPU all-to-all on a 9,216-GPU rail fat tree).
A sub-fabric keeps the nodes of the hosts of the given GPUs (nodes with a ``host`` attribute)
and, tier by tier, the switches above them (``leaf`` -> ``spine`` -> ``core``: a neighbour is
added when its tier is higher than the node's). On up-down fabrics (rail and k-ary fat trees,
multi-plane fat trees) every shortest path between two kept GPUs climbs to a common ancestor
and comes down, so it stays inside the sub-fabric; nodes and links keep their relative order
and hosts keep their ``host`` attribute, so ``dmodk`` and ``spray`` routes are the same links
as on the whole fabric (tested). ``ecmp`` hashes node indices, so it draws different (equally
valid) next hops. GPUs are renumbered ``0..k-1`` in global order; :class:`MappedRouter`
takes global GPU ids. Fabrics without ``host`` attributes, other switch kinds, or PXN routing
(its proxy is computed from global ids) fall back to the whole fabric.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import networkx as nx
import numpy as np

from sim.engine.pxn import PxnRouter
from sim.engine.routing import Router, RouteSet
from sim.fabric_build import fabric_for
from sim.scenario.schema import FabricSpec

TIER = {"leaf": 1, "spine": 2, "core": 3}
"""Switch tiers above the hosts (:mod:`topologies`)."""


class MappedRouter(Router):
    """A router of a sub-fabric that takes global GPU ids."""

    def __init__(self, inner: Router, local_of: np.ndarray) -> None:
        self.inner = inner
        self.fabric = inner.fabric
        self.mode = inner.mode
        self.local_of = local_of

    def routes(self, src_gpu: np.ndarray, dst_gpu: np.ndarray) -> RouteSet:
        src, dst = np.asarray(src_gpu, dtype=np.int64), np.asarray(dst_gpu, dtype=np.int64)
        return self.inner.routes(self.local_of[src], self.local_of[dst])


@dataclass
class GraphIndex:
    """One pass over a whole fabric graph: node order, host -> nodes, GPU id -> node."""

    graph: nx.DiGraph
    spec: FabricSpec
    gpu: str

    def __post_init__(self) -> None:
        self.order: dict[str, int] = {}
        self.host_nodes: dict[int, list[str]] = {}
        self.gpu_node: dict[int, str] = {}
        self.prunable = not self.spec.pxn
        for i, (n, d) in enumerate(self.graph.nodes(data=True)):
            self.order[n] = i
            if "host" in d:
                self.host_nodes.setdefault(int(d["host"]), []).append(n)
            elif d.get("kind") not in TIER:
                self.prunable = False
            if d.get("kind") == "gpu":
                self.gpu_node[int(d["gpu"])] = n
                self.prunable &= "host" in d
        self.n_gpus = len(self.gpu_node)
        self._whole: MappedRouter | None = None
        self._above: dict[str, frozenset[str]] = {}

    def host_of(self, gpu: int) -> int:
        """The host of GPU ``gpu`` (the GPU itself on a fabric without hosts)."""
        return int(self.graph.nodes[self.gpu_node[gpu]].get("host", -1 - gpu))

    def router(self, gpus: Iterable[int]) -> MappedRouter:
        """A router over the sub-fabric of ``gpus``' hosts (global GPU ids)."""
        if not self.prunable:
            return self.whole()
        keep = self._closure(sorted(set(gpus)))
        names = sorted(keep, key=self.order.__getitem__)
        sub = nx.DiGraph(**self.graph.graph)
        gpu_ids = sorted(int(self.graph.nodes[n]["gpu"]) for n in names
                         if self.graph.nodes[n].get("kind") == "gpu")
        local = {g: i for i, g in enumerate(gpu_ids)}
        for n in names:
            attrs = dict(self.graph.nodes[n])
            if attrs.get("kind") == "gpu":
                attrs["gpu"] = local[int(attrs["gpu"])]
            sub.add_node(n, **attrs)
        adj = self.graph.adj
        sub.add_edges_from((u, v, d) for u in names for v, d in adj[u].items() if v in keep)
        local_of = np.full(self.n_gpus, -1, dtype=np.int64)
        local_of[gpu_ids] = np.arange(len(gpu_ids))
        fabric = fabric_for(sub, self.gpu, self.spec.derate)
        return MappedRouter(Router(fabric, self.spec.multipath), local_of)

    def whole(self) -> MappedRouter:
        """A router over the whole fabric (identity mapping), built once."""
        if self._whole is None:
            fabric = fabric_for(self.graph, self.gpu, self.spec.derate)
            inner = (PxnRouter if self.spec.pxn else Router)(fabric, self.spec.multipath)
            self._whole = MappedRouter(inner, np.arange(self.n_gpus, dtype=np.int64))
        return self._whole

    def _closure(self, gpus: list[int]) -> set[str]:
        """The GPUs' hosts' nodes and the switches above them, tier by tier, up to the lowest
        tier at which every two GPUs on different hosts have a common ancestor (shortest
        paths between them climb no higher)."""
        graph, nodes = self.graph, self.graph.nodes
        hosts = [self.host_of(g) for g in gpus]
        keep = {n for h in set(hosts) for n in self.host_nodes[h]}
        frontier = [{v for v in graph.successors(self.gpu_node[g]) if nodes[v].get("kind") != "gpu"}
                    for g in gpus]
        cross = np.not_equal.outer(hosts, hosts)
        met = np.zeros_like(cross)
        while any(frontier) and not met[cross].all():
            above: dict[str, list[int]] = {}
            for i, front in enumerate(frontier):
                up = set().union(*(self._up(u) for u in front))
                frontier[i] = up
                for v in up:
                    above.setdefault(v, []).append(i)
            for members in above.values():
                met[np.ix_(members, members)] = True
            keep |= set(above)
        return keep

    def _up(self, u: str) -> frozenset[str]:
        """Neighbours of ``u`` in a higher tier (cached)."""
        if u not in self._above:
            nodes, tier = self.graph.nodes, TIER.get(self.graph.nodes[u].get("kind"), 0)
            self._above[u] = frozenset(v for v in self.graph.successors(u)
                                       if TIER.get(nodes[v].get("kind"), 0) > tier)
        return self._above[u]
