"""The part of a fabric that a few GPUs need: their hosts and the switches above them.

Fast mode (:mod:`moesim.step.fast`) routes only the representative pipeline and its groups, but
the engine's router does one reverse breadth-first search per destination over the *whole*
graph (about 0.5 s for the 4,032 pairs of a 64-GPU all-to-all on a 9,216-GPU rail fat tree).
A sub-fabric keeps the nodes of the hosts of the given GPUs (nodes with a ``host`` attribute)
and, tier by tier, the switches above them (``leaf`` -> ``spine`` -> ``core``: a neighbour is
added when its tier is higher than the node's). On up-down fabrics (rail and k-ary fat trees,
multi-plane fat trees) every shortest path between two kept GPUs climbs to a common ancestor
and comes down, so it stays inside the sub-fabric; nodes and links keep their relative order
and hosts keep their ``host`` attribute, so ``dmodk`` and ``spray`` routes are the same links
as on the whole fabric (tested); ``ecmp`` hashes the GPUs' and switches' whole-fabric ids
(:class:`moesim.engine.routing.Router` ``hash_ids``), so it draws the whole fabric's next hops
too (tested; before 2026-12-03 it hashed the sub-fabric's own numbers, an equally valid but
different draw, and ECMP collisions on uplinks move a step by up to ~20 %). GPUs are
renumbered ``0..k-1`` in global order; :class:`MappedRouter` takes global GPU ids. Fabrics
without ``host`` attributes, other switch kinds, or PXN routing (its proxy is computed from
global ids) fall back to the whole fabric.

A sub-fabric is cut from arrays, not built as a networkx subgraph: the whole graph's links
are read once (:class:`moesim.engine.fabric.LinkTable`, 0.1-0.2 s at 9,216 GPUs), the climb is
numpy over (GPU, switch) pairs, and the kept links are a mask of the table (same order as the
induced subgraph's, tested). Measured at 9,216 GPUs (shared 2-core machine): 3-6 ms per
sub-fabric of 100-700 nodes, where the subgraph route took 17-85 ms.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any

import numpy as np

from moesim.engine.fabric import Fabric, LinkTable, link_table
from moesim.engine.pxn import PxnRouter
from moesim.engine.routing import Router, RouteSet
from moesim.errors import FabricError
from moesim.fabric.build import derating, fabric_for
from moesim.fabric.spec import FabricSpec

if TYPE_CHECKING:
    from moesim.engine.fabric import Graph

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


class GlobalRouter(Router):
    """A sub-fabric's router answering in the whole fabric's ids: GPUs in, links out
    (``global_link[l]``: the whole fabric's id of sub-fabric link ``l``; the whole fabric's
    links are the link table's, in its order, as are the sub-fabric's kept ones)."""

    def __init__(self, inner: MappedRouter, global_link: np.ndarray, fabric: Fabric) -> None:
        self.inner = inner
        self.global_link = global_link
        self.fabric = fabric
        self.mode = inner.mode

    def routes(self, src_gpu: np.ndarray, dst_gpu: np.ndarray) -> RouteSet:
        rs = self.inner.routes(src_gpu, dst_gpu)
        return RouteSet(ptr=rs.ptr, link=self.global_link[rs.link], weight=rs.weight,
                        latency_s=rs.latency_s, cap_Bps=rs.cap_Bps)


@dataclass
class GraphIndex:
    """One pass over a whole fabric graph: node order, host -> nodes, GPU id -> node, and (on
    the first sub-fabric) its links as arrays (:class:`moesim.engine.fabric.LinkTable`)."""

    graph: Graph
    spec: FabricSpec
    gpu: str

    def __post_init__(self) -> None:
        self.order: dict[str, int] = {}
        self.host_nodes: dict[int, list[str]] = {}
        self.gpu_node: dict[int, str] = {}
        self.prunable = not self.spec.pxn
        self._gpu_nodes = 0  # nodes of kind gpu (more than gpu_node: duplicate ids)
        tier, host = [], []  # per node: TIER (0 below the leaves), host (None: no host)
        for i, (n, d) in enumerate(self.graph.nodes(data=True)):
            self.order[n] = i
            tier.append(TIER.get(str(d.get("kind")), 0))
            host.append(int(d["host"]) if "host" in d else None)
            self._add_node(n, d)
        self.n_gpus = len(self.gpu_node)
        self.node_tier = np.array(tier, dtype=np.int64)
        self.has_host = np.array([h is not None for h in host], dtype=bool)
        self.node_host = np.array([0 if h is None else h for h in host], dtype=np.int64)
        self.prunable &= self._gpu_nodes == self.n_gpus  # duplicate ids: whole() reports them
        self._whole: MappedRouter | None = None

    def _add_node(self, n: str, d: Mapping[str, Any]) -> None:
        """Index node ``n`` (attributes ``d``); a node outside hosts and TIER, or a GPU outside
        hosts, makes the fabric not prunable."""
        if "host" in d:
            self.host_nodes.setdefault(int(d["host"]), []).append(n)
        elif d.get("kind") not in TIER:
            self.prunable = False
        if d.get("kind") == "gpu":
            self.gpu_node[int(d["gpu"])] = n
            self.prunable &= "host" in d
            self._gpu_nodes += 1

    def host_of(self, gpu: int) -> int:
        """The host of GPU ``gpu`` (the GPU itself on a fabric without hosts)."""
        return int(self.graph.nodes[self.gpu_node[gpu]].get("host", -1 - gpu))

    def router(self, gpus: Iterable[int]) -> MappedRouter:
        """A router over the sub-fabric of ``gpus``' hosts (global GPU ids). Its
        :attr:`Fabric.graph` is a view of the whole graph (GPU nodes keep their global ``gpu``
        attribute; the sub-fabric numbers its GPUs 0..k-1 in global order)."""
        if not self.prunable:
            return self.whole()
        return self._sub(self._closure(sorted(set(gpus))))

    def global_router(self, gpus: Iterable[int]) -> Router:
        """Routes between ``gpus`` computed on their sub-fabric but named in the whole fabric's
        GPU and link ids (:class:`GlobalRouter`) on a prunable fabric (its sub-fabrics route
        as the whole fabric does); else :meth:`whole`."""
        if not self.prunable:
            return self.whole()
        keep = self._closure(sorted(set(gpus)))
        mapped = self._sub(keep)
        return GlobalRouter(mapped, self._table.within(keep), self.whole().fabric)

    def _sub(self, keep: np.ndarray) -> MappedRouter:
        gpu_ids = np.sort(self._gpu_of[keep & (self._gpu_of >= 0)])
        local_of = np.full(self.n_gpus, -1, dtype=np.int64)
        local_of[gpu_ids] = np.arange(gpu_ids.size)
        table = self._table
        links = table.within(keep)
        if not links.size:
            raise FabricError("fabric has no links")
        table.check(links)
        tiers = set(table.tier_key[links].tolist())
        view = self.graph.subgraph(table.names[i] for i in np.flatnonzero(keep).tolist())
        fabric = table.build(links, keep, self._gpu_index[gpu_ids],
                             derating(tiers, self.graph, self.gpu, self.spec.derate), view)
        hash_ids = (gpu_ids, np.flatnonzero(keep))  # whole-fabric ids: ECMP hashes them
        return MappedRouter(Router(fabric, self.spec.multipath, hash_ids=hash_ids), local_of)

    def whole(self) -> MappedRouter:
        """A router over the whole fabric (identity mapping), built once."""
        if self._whole is None:
            fabric = fabric_for(self.graph, self.gpu, self.spec.derate, self._table)
            inner = (PxnRouter if self.spec.pxn else Router)(fabric, self.spec.multipath)
            self._whole = MappedRouter(inner, np.arange(self.n_gpus, dtype=np.int64))
        return self._whole

    @cached_property
    def _table(self) -> LinkTable:
        return link_table(self.graph)

    @cached_property
    def _gpu_index(self) -> np.ndarray:
        """Node index of each GPU id."""
        return np.array([self.order[self.gpu_node[g]] for g in range(self.n_gpus)],
                        dtype=np.int64)

    @cached_property
    def _gpu_of(self) -> np.ndarray:
        """GPU id of each node, -1 for other nodes."""
        out = np.full(len(self.order), -1, dtype=np.int64)
        out[self._gpu_index] = np.arange(self.n_gpus)
        return out

    @cached_property
    def _succ(self) -> tuple[np.ndarray, np.ndarray]:
        """Every link, grouped by source node (:func:`_csr`)."""
        return _csr(self._table.src, self._table.dst, len(self.order))

    @cached_property
    def _up(self) -> tuple[np.ndarray, np.ndarray]:
        """The links to a higher tier, grouped by source node (:func:`_csr`)."""
        src, dst = self._table.src, self._table.dst
        up = self.node_tier[dst] > self.node_tier[src]
        return _csr(src[up], dst[up], len(self.order))

    def _closure(self, gpus: list[int]) -> np.ndarray:
        """Mask of the GPUs' hosts' nodes and the switches above them, tier by tier, up to the
        lowest tier at which every two GPUs on different hosts have a common ancestor
        (shortest paths between them climb no higher)."""
        start = self._gpu_index[np.asarray(gpus, dtype=np.int64)]
        hosts = self.node_host[start]
        keep = np.isin(self.node_host, hosts) & self.has_host
        member, node = _expand(np.arange(start.size), start, *self._succ)
        member, node = member[self._gpu_of[node] < 0], node[self._gpu_of[node] < 0]
        cross = np.not_equal.outer(hosts, hosts)
        met = np.zeros_like(cross)
        while node.size and not met[cross].all():
            member, node = _expand(member, node, *self._up)
            code = _distinct(member * len(self.order) + node)
            member, node = np.divmod(code, len(self.order))
            above = _distinct(node)
            shared = np.zeros((start.size, above.size), dtype=bool)
            shared[member, np.searchsorted(above, node)] = True
            met |= shared @ shared.T  # bool matmul: no BLAS threads for a tiny product
            keep[above] = True
        return keep


def _distinct(values: np.ndarray) -> np.ndarray:
    """The distinct ``values``, sorted (np.unique without its per-call overhead)."""
    out = np.sort(values)
    return out[np.concatenate(([True], out[1:] != out[:-1]))] if out.size else out


def _csr(src: np.ndarray, dst: np.ndarray, n_nodes: int) -> tuple[np.ndarray, np.ndarray]:
    """Links ``src -> dst`` grouped by source node: (``seg``, n_nodes + 1 offsets; the heads),
    node u's heads being ``heads[seg[u]:seg[u + 1]]``."""
    order = np.argsort(src, kind="stable")
    seg = np.concatenate(([0], np.cumsum(np.bincount(src, minlength=n_nodes))))
    return seg, dst[order]


def _expand(owner: np.ndarray, node: np.ndarray, seg: np.ndarray, head: np.ndarray
            ) -> tuple[np.ndarray, np.ndarray]:
    """Every (owner, head of a link out of node) for the pairs (``owner[i]``, ``node[i]``)."""
    count = seg[node + 1] - seg[node]
    at = np.repeat(np.arange(node.size), count)
    pos = np.arange(at.size) - np.repeat(np.cumsum(count) - count, count) + seg[node][at]
    return owner[at], head[pos]
