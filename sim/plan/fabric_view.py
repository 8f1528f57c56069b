"""Where a layout's groups land, cheaply enough to ask for hundreds of layouts.

:func:`moesim.parallel.placement.place` re-indexes the whole fabric on every call (about
0.7 s at 4096
GPUs). The layout search asks for many layouts on one fabric, so this view indexes the
fabric once and caches each group kind's placement by the grid shape that determines its
groups (dense kinds: tp, cp, dp, pp; expert kinds: etp, ep, edp, pp). It reuses
:mod:`moesim.parallel.placement`'s own internals so the answers are identical to ``place``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from moesim.calibration import link_achievable_fraction
from moesim.fabric.index import IndexedFabric, index_fabric
from moesim.parallel.layout import ParallelLayout
from moesim.parallel.placement import GroupPlacement, place_kind

if TYPE_CHECKING:
    import networkx as nx

DENSE = ("tp", "cp", "dp")


class FabricView:
    """A fabric indexed once; per-kind placements of layouts, cached."""

    def __init__(self, graph: nx.DiGraph, gpu: str) -> None:
        self.graph = graph
        self.gpu = gpu
        self.medium = str(graph.graph.get("fabric", "ib"))
        self.n_gpus = sum(1 for _, k in graph.nodes(data="kind") if k == "gpu")
        self.gpus_per_host = int(graph.graph.get("gpus_per_host", 8))
        self.domain_size = int(graph.graph.get("nvlink_domain_size", self.gpus_per_host))
        self._fab: dict[int, IndexedFabric] = {}
        self._cache: dict[tuple[object, ...], GroupPlacement] = {}
        self._legs: dict[tuple[int, ...], tuple[tuple[int, float], ...]] = {}

    def _indexed(self, world: int) -> IndexedFabric:
        if world not in self._fab:
            self._fab[world] = index_fabric(self.graph, 0, world)
        return self._fab[world]

    def kind(self, layout: ParallelLayout, kind: str) -> GroupPlacement | None:
        """Placement of ``kind`` groups (None when their size is 1)."""
        if getattr(layout, kind) == 1:
            return None
        shape: tuple[int, ...] = (
            (layout.tp, layout.cp, layout.dp, layout.pp) if kind in DENSE
            else (layout.etp, layout.ep, layout.edp, layout.pp))
        if kind in ("tp", "etp", "ep", "cp"):  # runs of consecutive ranks: inner dims decide
            shape = shape[: {"tp": 1, "etp": 1, "cp": 2, "ep": 2}[kind]]
        key = (kind, layout.world_size, shape)
        if key not in self._cache:
            fab = self._indexed(layout.world_size)
            self._cache[key] = place_kind(layout, fab, kind)
        return self._cache[key]

    def effective_bw_GBps(self, layout: ParallelLayout, kind: str) -> float:
        """Achievable GB/s per GPU of the slowest link class the ``kind`` group crosses."""
        placed = self.kind(layout, kind)
        if placed is None:
            return float("inf")
        fraction = link_achievable_fraction(placed.slowest_tier, self.medium, self.gpu)
        return placed.slowest_bw_GBps * fraction

    def ep_legs(self, layout: ParallelLayout) -> tuple[tuple[int, float], ...]:
        """The all-to-all legs of an EP member: (peers reached on the leg, achievable GB/s per
        GPU of its links), worst member of any EP group. Inside one NVLink domain: one leg at
        the slowest class the group crosses. Across domains: peers in the member's own domain
        over NVLink, the others at the slowest class crossed (the NIC side); a group that needs
        forwarding (PXN) also relays those through NVLink. The legs use different links, so
        the step's per-link bound (:class:`moesim.step.estimate.A2ATimer`) is the slower."""
        placed = self.kind(layout, "ep")
        if placed is None:
            return ()
        key = (layout.world_size, layout.etp, layout.ep)  # runs of consecutive ranks
        if key not in self._legs:
            self._legs[key] = self._ep_legs(layout, placed)
        return self._legs[key]

    def _ep_legs(self, layout: ParallelLayout, placed: GroupPlacement
                 ) -> tuple[tuple[int, float], ...]:
        groups = np.array(layout.groups("ep"))
        domain = self._indexed(layout.world_size).domain[groups]
        same = (domain[:, :, None] == domain[:, None, :]).sum(axis=2) - 1  # peers in domain
        nvlink = float(self._indexed(layout.world_size).class_bw_GBps["nvlink"][groups].min())
        slowest = self.effective_bw_GBps(layout, "ep")
        inside, outside = int(same.max()), int((layout.ep - 1 - same).max())
        if outside == 0 or nvlink <= 0:
            return ((layout.ep - 1, slowest),)
        nvlink *= link_achievable_fraction("nvlink", self.medium, self.gpu)
        relayed = outside if placed.forwarded else 0
        return ((inside + relayed, nvlink), (outside, slowest))

    def place_all(self, layout: ParallelLayout) -> list[GroupPlacement]:
        """Like :func:`moesim.parallel.placement.place`, from the cache."""
        kinds = ("tp", "cp", "ep", "etp", "dp", "edp", "pp")
        return [p for p in (self.kind(layout, k) for k in kinds) if p is not None]
