"""Placement report: how each process group of a parallel layout lands on a fabric.

Ranks map onto fabric GPUs in global index order: rank ``r`` runs on the GPU whose ``gpu``
attribute is ``r + first_gpu`` (GPU indices are host-major, so Megatron's rank order
tp-cp-ep-dp-pp fills NVLink domains with the fastest-varying groups first).

A pair of GPUs' *span* is the highest switch tier its path must climb, GPUs being
non-transit (a path may not pass through a third GPU): both on one NVSwitch fabric ->
``nvlink``; else through one leaf layer only (e.g. same rail leaf) -> ``leaf``; through a
spine -> ``spine``; through a core -> ``core``. "Must climb" is the minimum over paths of
the highest tier on the path (in fat trees: up to the lowest common ancestor). A group's
span is the worst pair's, and a kind's span the worst group's.

How it is computed: for each tier level t, the non-GPU nodes of tier <= t (NICs always)
split into connected components; a pair reaches each other within level t iff the
components adjacent to the two GPUs intersect. Per group and level, "every pair shares a
component" is checked with bit masks over the members, so the cost is linear in the group
size; groups with the same member pattern (multiset of per-GPU component signatures) share
one cached answer.

Pairs with no GPU-free path at all (different planes of different hosts on a multi-plane
fat tree) are placed as if forwarded through an NVLink peer (NCCL's PXN): such a group is
marked ``forwarded`` and crosses NVLink too.

The slowest link class of a group is the one with the least bandwidth per GPU among those
its pairs cross: nvlink (pairs on one NVLink domain), pcie and nic (any pair beyond it),
leaf_spine (pairs through a spine), spine_core (through a core). Per-GPU bandwidth is the
line rate of the GPU's own links for nvlink, pcie and nic, and its fluid share of a
switch's uplinks above that: NIC rate x (leaf uplink / leaf NIC downlink), times (spine
uplink / spine downlink) for spine_core; so a 4:1 leaf with 50 GB/s NICs gives 12.5.
Ties go to the class nearest the GPU (a 1:1 fabric reports ``nic``, not ``leaf_spine``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from moesim.errors import ConfigError, FabricError
from moesim.fabric.index import LEVELS, LINK_CLASSES, IndexedFabric, index_fabric
from moesim.parallel.layout import ParallelLayout

if TYPE_CHECKING:
    import networkx as nx

PLACE_KINDS = ("tp", "cp", "ep", "etp", "dp", "edp", "pp")
SPANS = ("gpu", "nvlink", "leaf", "spine", "core")
_CLASSES_ABOVE = {1: ("pcie", "nic"), 2: ("pcie", "nic", "leaf_spine"),
                  3: ("pcie", "nic", "leaf_spine", "spine_core")}


@dataclass(frozen=True)
class GroupPlacement:
    """Where the groups of one kind land (worst case over the groups)."""

    kind: str                # tp, cp, ep, etp, dp, edp, pp
    size: int
    count: int               # number of such groups
    span: str                # gpu, nvlink, leaf, spine, core
    slowest_tier: str        # slowest link class crossed: nvlink, pcie, nic, leaf_spine, ...
    slowest_bw_GBps: float   # per direction, per GPU, line rate (GB/s)
    domains_per_group: int   # max NVLink domains one group touches
    hosts_per_group: int
    forwarded: bool = False  # some pair needs forwarding through an NVLink peer (PXN)


def _all_pairs_meet(sets: Sequence[frozenset[int]]) -> bool:
    """Does every pair of members (by position) share a component? Bit masks, linear."""
    masks: dict[int, int] = {}
    for i, cs in enumerate(sets):
        for c in cs:
            masks[c] = masks.get(c, 0) | (1 << i)
    full = (1 << len(sets)) - 1
    if full in masks.values():
        return True
    for cs in sets:
        covered = 0
        for c in cs:
            covered |= masks[c]
        if covered != full:
            return False
    return True


def _group_level(reach: Sequence[Sequence[frozenset[int]]], members: Sequence[int]) -> int:
    """Lowest level within which every pair of ``members`` meets; -1 if none."""
    for level in LEVELS:
        if _all_pairs_meet([reach[level][m] for m in members]):
            return level
    return -1


def _classify(fab: IndexedFabric, kind: str, members: tuple[int, ...],
              cache: dict[tuple[int, ...], tuple[int, bool, bool]]) -> tuple[int, bool, bool]:
    """(span level, whether a pair shares NVLink, forwarded) for one group, cached."""
    pattern = tuple(sorted(fab.pattern[m] for m in members))
    if pattern in cache:
        return cache[pattern]
    nvlink = not _all_pairs_disjoint([fab.reach[0][m] for m in members])
    level, forwarded = _group_level(fab.reach, members), False
    if level < 0:
        level, forwarded = _group_level(fab.forwarded_reach, members), True
        if level < 0:
            shown = ", ".join(map(str, members[:4])) + (", ..." if len(members) > 4 else "")
            raise FabricError(f"layout: {kind} group of ranks ({shown}) has GPUs with no path "
                              "between them, even forwarding through NVLink peers")
    cache[pattern] = (level, nvlink or forwarded, forwarded)
    return cache[pattern]


def _all_pairs_disjoint(sets: Sequence[frozenset[int]]) -> bool:
    seen: set[int] = set()
    for cs in sets:
        if seen & cs:
            return False
        seen |= cs
    return True


def _slowest(fab: IndexedFabric, members: np.ndarray, level: int,
             nvlink: bool) -> tuple[float, int, str]:
    """(bandwidth, class order, class) of the slowest class the group crosses."""
    crossed = (("nvlink",) if nvlink or level == 0 else ()) + _CLASSES_ABOVE.get(level, ())
    return min((float(fab.class_bw_GBps[c][members].min()), LINK_CLASSES.index(c), c)
               for c in crossed)


def _distinct_per_row(values: np.ndarray) -> int:
    rows = np.sort(values, axis=1)
    return int((1 + (np.diff(rows, axis=1) != 0).sum(axis=1)).max())


def place_kind(layout: ParallelLayout, fab: IndexedFabric, kind: str) -> GroupPlacement:
    groups = np.array(layout.groups(kind))
    cache: dict[tuple[int, ...], tuple[int, bool, bool]] = {}
    levels, slowest, any_forwarded = [], [], False
    for row in groups:
        level, nvlink, forwarded = _classify(fab, kind, tuple(row.tolist()), cache)
        levels.append(level)
        any_forwarded = any_forwarded or forwarded
        slowest.append(_slowest(fab, row, level, nvlink))
    bw, _, cls = min(slowest)
    return GroupPlacement(
        kind=kind, size=groups.shape[1], count=groups.shape[0], span=SPANS[max(levels) + 1],
        slowest_tier=cls, slowest_bw_GBps=bw,
        domains_per_group=_distinct_per_row(fab.domain[groups]),
        hosts_per_group=_distinct_per_row(fab.host[groups]), forwarded=any_forwarded,
    )


def place(layout: ParallelLayout, graph: nx.DiGraph, first_gpu: int = 0) -> list[GroupPlacement]:
    """One :class:`GroupPlacement` per group kind of size > 1, in :data:`PLACE_KINDS` order.

    >>> from moesim.topologies import rail_fat_tree
    >>> [(p.kind, p.span, p.slowest_tier) for p in place(ParallelLayout(ep=16, dp=32),
    ...                                                   rail_fat_tree(4, hosts_per_su=4))]
    [('ep', 'spine', 'nic'), ('dp', 'spine', 'nic'), ('edp', 'leaf', 'nic')]
    """
    if not isinstance(layout, ParallelLayout):
        raise ConfigError("layout", f"expected a ParallelLayout, got {type(layout).__name__}")
    if isinstance(first_gpu, bool) or not isinstance(first_gpu, int) or first_gpu < 0:
        raise ConfigError("first_gpu", f"must be an integer >= 0, got {first_gpu!r}")
    fab = index_fabric(graph, first_gpu, layout.world_size)
    sizes = {k: getattr(layout, k) for k in PLACE_KINDS}
    return [place_kind(layout, fab, k) for k in PLACE_KINDS if sizes[k] > 1]


def placement_table(entries: Sequence[GroupPlacement]) -> str:
    """A small aligned text table of :func:`place` entries (bandwidth in GB/s per GPU)."""
    head = ("kind", "size", "count", "span", "slowest", "GB/s", "domains", "hosts")
    rows = [head] + [
        (p.kind, str(p.size), str(p.count), p.span + ("*" if p.forwarded else ""),
         p.slowest_tier, f"{p.slowest_bw_GBps:g}", str(p.domains_per_group),
         str(p.hosts_per_group)) for p in entries]
    widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
    lines = ["  ".join(c.ljust(w) if i in (0, 3, 4) else c.rjust(w)
                       for i, (c, w) in enumerate(zip(r, widths, strict=True)))
             for r in rows]
    if any(p.forwarded for p in entries):
        lines.append("* some pairs have no GPU-free path: forwarded through an NVLink peer")
    return "\n".join(line.rstrip() for line in lines)
