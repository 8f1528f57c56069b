"""Flows alone on their links, timed in closed form instead of by the rate solver.

Most point-to-point sends of a pipelined step start on an idle network and drain before the
next flow starts (fast mode at 9,216 GPUs: 839 of 840 pipeline sends); the sends of one ring
step of a TP group cross disjoint links. A flow whose links no other flow uses gets, under
max-min sharing, the least ``cap / weight`` over them and drains ``size / rate`` later.
:class:`moesim.engine.network.FlowNetwork` runs such flows here (:class:`SoloSet`), charging the
link counters as a solve would, and skips their rate solves, whether or not solved flows run
elsewhere; when a flow comes to share a link with one of them, it joins the solved flows
(:mod:`moesim.engine.solorun`: how and when). Tested against the solver path in
``tests/test_engine_solo.py``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from moesim.engine.maxmin import LEVEL_RTOL


class Solo(NamedTuple):
    """A flow alone on its links: its id, start, rate and what it puts on each of its hops
    (a flow that may run alone crosses no link twice, so its hops are distinct links). A named
    tuple, not a frozen dataclass: one is made per ring chunk, and it is made in half the time."""

    fid: int
    t0_s: float
    size_bytes: float
    rate_Bps: float
    bottleneck: int  # solver link that sets the rate (as the solver names it)
    hops: np.ndarray  # its links (implied ones included), in route order
    weights: np.ndarray  # weight of each hop
    solver_links: np.ndarray  # its links the solver keeps
    load_Bps: np.ndarray  # per hop: the load it puts there (implied hops: their partner's)

    @property
    def drain_s(self) -> float:
        """When its last byte leaves its links (the solver path's planned drain)."""
        return self.t0_s + self.size_bytes / self.rate_Bps


class SoloSet:
    """The flows running alone now, and what they hold of each link."""

    def __init__(self, n_links: int) -> None:
        self.flows: dict[int, Solo] = {}
        self.on = np.zeros(n_links, dtype=np.int64)  # hops of solo flows per link
        self.load_Bps = np.zeros(n_links)
        self.owner = np.full(n_links, -1, dtype=np.int64)  # the solo flow on each link

    def disjoint(self, hops: np.ndarray) -> bool:
        """Whether flows with these hops (all of them, together) cross no link twice and no
        link a solo flow holds."""
        if self.on[hops].any():
            return False
        if hops.size < 2:
            return True
        ordered = np.sort(hops)
        return not bool((ordered[1:] == ordered[:-1]).any())

    def add(self, solo: Solo) -> None:
        """Flow ``solo`` runs alone: no solo flow holds its hops (:meth:`disjoint`), so they
        hold nothing (0 flows, load 0.0) and are set, not added to (the same values)."""
        self.flows[solo.fid] = solo
        self.on[solo.hops] = 1
        self.load_Bps[solo.hops] = solo.load_Bps
        self.owner[solo.hops] = solo.fid

    def remove(self, fid: int) -> Solo:
        solo = self.flows.pop(fid)
        self.on[solo.hops] = 0  # it was the only one there
        self.load_Bps[solo.hops] = 0.0  # disjoint links: it was the only load there
        self.owner[solo.hops] = -1
        return solo

    def sharing(self, hops: np.ndarray) -> list[int]:
        """The solo flows on any of the links ``hops``, by id."""
        owners = self.owner[hops]
        return np.unique(owners[owners >= 0]).tolist()

    def clear(self) -> list[Solo]:
        """Every solo flow, by start time, removed from the set."""
        out = sorted(self.flows.values(), key=lambda s: (s.t0_s, s.fid))
        self.flows.clear()
        self.on[:] = 0
        self.load_Bps[:] = 0.0
        self.owner[:] = -1
        return out


def alone(fid: int, t0_s: float, size_bytes: float, hops: np.ndarray, weights: np.ndarray,
          solve_map: np.ndarray, load_of: np.ndarray, cap_Bps: np.ndarray) -> Solo:
    """The rates the solver would give flow ``fid`` alone (``solve_map`` / ``load_of`` as
    :class:`moesim.engine.network.FlowNetwork` keeps them: implied links dropped, then charged
    their partner's load). ``hops`` are distinct links."""
    pad = cap_Bps.shape[0]
    mapped = solve_map[hops]
    kept = mapped < pad
    links, wts = mapped[kept], weights[kept]
    level = cap_Bps[links] / wts
    rate = float(level.min())
    on_min = level <= rate * (1.0 + LEVEL_RTOL)
    order = np.argsort(links)
    at = np.minimum(np.searchsorted(links[order], load_of[hops]), links.size - 1)
    found = links[order][at] == load_of[hops]
    load = np.where(found, (wts * rate)[order][at], 0.0)
    return Solo(fid=fid, t0_s=t0_s, size_bytes=size_bytes, rate_Bps=rate,
                bottleneck=int(links[int(np.argmax(on_min))]), hops=hops, weights=weights,
                solver_links=links, load_Bps=load)


@dataclass(frozen=True)
class LoneRoute:
    """What a flow between one (source, destination) pair gets from the router and, alone on
    its links, from :func:`alone`, whatever its size and start: kept per pair so that a
    point-to-point send (:meth:`moesim.engine.solorun.SoloFlows.start_one`) looks them up."""

    ptr: int  # where the route's (link, weight) pairs sit in the network's PairStore
    hops: np.ndarray
    weights: np.ndarray
    latency_s: float
    cap_Bps: float  # rate an otherwise idle fabric would give it (RouteSet.cap_Bps)
    alone: Solo | None  # alone(...) of a flow of this pair; None: its route crosses a link twice

    def solo(self, fid: int, t0_s: float, size_bytes: float) -> Solo:
        """Flow ``fid`` of ``size_bytes`` from ``t0_s``, alone: :func:`alone`'s answer."""
        a = self.alone
        assert a is not None
        return Solo(fid=fid, t0_s=t0_s, size_bytes=size_bytes, rate_Bps=a.rate_Bps,
                    bottleneck=a.bottleneck, hops=a.hops, weights=a.weights,
                    solver_links=a.solver_links, load_Bps=a.load_Bps)


def moved_bytes(solo: Solo, dt_s: float) -> np.ndarray:
    """Bytes per hop after ``dt_s`` at its rate: the solver path's ``FlowNetwork._advance``
    for one flow, a drain's float overshoot taken back per hop."""
    full = solo.rate_Bps * dt_s
    moved = solo.load_Bps * dt_s
    if full > solo.size_bytes:
        moved = moved - (full - solo.size_bytes) * solo.weights
    return moved
