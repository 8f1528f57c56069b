"""Each DP replica's pipeline input beside the all-to-alls on its own route (fast mode's
whole-fabric phases, :mod:`moesim.step.phased`).

Mechanism (full mode, traced at 256 GPUs 4:1 ECMP, README): the members of an EP group are
DP replicas of one stage, and each gets its pipeline input by its own send, which ECMP hashes
onto an uplink of its own. Some replicas' sends stack on one uplink, where an all-to-all of
another micro-batch, already running on the same 4:1 uplinks, holds dozens of flows: under
max-min the send gets one share among them, so those replicas' inputs arrive tens of ms late
(stage 3's first dispatch: members sending from 220 to 263 ms) and the group's all-to-all waits
for its last member. The representative's send as copies (:mod:`moesim.step.replicas`) runs in
the step's network beside the pipeline sends and rings, but the all-to-alls are solved apart
(:class:`moesim.step.phases.A2APhases`), and every copy arrives at once.

Model: every all-to-all phase leaves its flows on the step's clock (:class:`LinkLoad`: per flow
and link, its copies and its mean rate from its release to its drain, from the phase's own
solve). When a pass with a pipeline input reaches its first all-to-all, each replica's copy of
the send is timed on its own route (:class:`ReplicaInputs`), at each instant at the rate
:func:`share_drain_s` gives it beside the phase flows on its links then and the send's other
copies; a member whose input comes after the representative's pass started releases that
all-to-all later by the difference (:meth:`moesim.step.phased.PhasedState.a2a_arrival_s`).

The rate on a link is a max-min water level with the phase flows' rates held fixed: at least
``(cap - load) / copies`` (the room they leave) and at least ``cap / (flows + copies)`` (one
share each); the larger of these lower bounds is exact when the link's phase flows are all
bottlenecked elsewhere (below the level: a NIC link) or all on it (at the level: a 4:1
uplink), and low by at most the factor ``(on + copies) / (flows + copies)`` otherwise (``on``:
the flows bottlenecked on the link). What it leaves to the step's network: the send beside the
rings and the other pipeline sends (the representative's copies, which gate its own pass: a
member starts no earlier than that pass), and the phase flows slowed by the send.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from moesim.engine.copies import CopiesRouter
from moesim.engine.routing import Router, RouteSet


@dataclass(frozen=True)
class LinkRows:
    """Flows on links over time: row ``i`` puts ``count[i]`` flows moving ``load_Bps[i]`` in
    all on link ``link[i]`` over ``[start_s[i], end_s[i])``."""

    link: np.ndarray
    count: np.ndarray
    load_Bps: np.ndarray
    start_s: np.ndarray
    end_s: np.ndarray

    def take(self, keep: np.ndarray, link: np.ndarray, shift_s: float = 0.0) -> LinkRows:
        """The rows ``keep`` with links ``link`` (renumbered), times moved by ``shift_s``."""
        return LinkRows(link, self.count[keep], self.load_Bps[keep],
                        self.start_s[keep] + shift_s, self.end_s[keep] + shift_s)


def flow_rows(router: CopiesRouter, flows: np.ndarray) -> LinkRows:
    """The rows of a phase's solved flows (``flows``: src, dst, size, start, drain per
    column, endpoint ids of ``router``) on ``router``'s links, each at its mean rate."""
    src, dst, size, start, drain = flows
    live = (size > 0) & (drain > start)
    rs = router.routes(src[live].astype(np.int64), dst[live].astype(np.int64))
    owner = np.repeat(np.arange(int(live.sum())), np.diff(rs.ptr))
    rate = (size[live] / (drain[live] - start[live]))[owner]
    return LinkRows(rs.link, rs.weight, rs.weight * rate, start[live][owner], drain[live][owner])


def share_drain_s(t0_s: float, size_bytes: float, cap_Bps: np.ndarray, copies: np.ndarray,
                  rows: LinkRows) -> float:
    """When a flow of ``size_bytes`` started at ``t0_s`` on a route of links with capacities
    ``cap_Bps`` drains, sharing link ``l`` with ``copies[l]`` flows like it (itself included)
    throughout and with the flows ``rows`` (``link``: the position on the route) while they
    run: at each instant the least over its links of the level
    ``max((cap - load) / copies, cap / (count + copies))`` (module docstring)."""
    live = rows.end_s > t0_s
    start, end = np.maximum(rows.start_s[live], t0_s), rows.end_s[live]
    t = np.unique(np.concatenate(([t0_s], start, end)))  # t[0] = t0_s
    at = (np.searchsorted(t, start), np.searchsorted(t, end))
    count = np.zeros((t.size + 1, cap_Bps.size))
    load = np.zeros_like(count)
    for sign, i in zip((1.0, -1.0), at, strict=True):
        np.add.at(count, (i, rows.link[live]), sign * rows.count[live])
        np.add.at(load, (i, rows.link[live]), sign * rows.load_Bps[live])
    count, load = np.cumsum(count[:-1], axis=0), np.cumsum(load[:-1], axis=0)
    level = np.maximum(np.maximum(cap_Bps - load, 0.0) / copies, cap_Bps / (count + copies))
    rate = level.min(axis=1)  # over [t[i], t[i + 1]); the last one open
    moved = np.concatenate(([0.0], np.cumsum(rate[:-1] * np.diff(t))))
    i = int(np.searchsorted(moved, size_bytes)) - 1  # moved[i] < size <= moved[i + 1]
    return float(t[i] + (size_bytes - moved[i]) / rate[i])


class LinkLoad:
    """The all-to-all phases' flows on the step's clock (:class:`LinkRows` per phase)."""

    def __init__(self) -> None:
        self._parts: list[tuple[float, float, LinkRows]] = []  # (t0, last end, rows)

    def add(self, rows: LinkRows, t0_s: float) -> None:
        """A phase whose rows' times count from ``t0_s``."""
        if rows.link.size:
            self._parts.append((t0_s, t0_s + float(rows.end_s.max()), rows))

    def on(self, links: np.ndarray, after_s: float) -> LinkRows:
        """The rows on ``links`` (sorted, unique; each row's link its index there) that run
        past ``after_s``, on the step's clock."""
        parts = []
        for t0, last, rows in self._parts:
            if last > after_s:
                keep = np.isin(rows.link, links) & (rows.end_s + t0 > after_s)
                parts.append(rows.take(keep, np.searchsorted(links, rows.link[keep]), t0))
        if not parts:
            empty = np.zeros(0)
            return LinkRows(empty.astype(np.int64), empty, empty, empty, empty)
        return LinkRows(*(np.concatenate([getattr(p, f) for p in parts]) for f in (
            "link", "count", "load_Bps", "start_s", "end_s")))


class ReplicaInputs:
    """Every replica's copy of a pipeline send on its own route beside :attr:`load` (module
    docstring); ``per_stage`` GPUs per stage, ranks of one stage contiguous (a peer on
    another stage: the same tp, cp and dp coordinates)."""

    def __init__(self, base: Router, per_stage: int, size_bytes: float) -> None:
        self.base, self.per, self.size = base, per_stage, size_bytes
        self.load = LinkLoad()
        self._routes: dict[tuple[int, int], tuple[RouteSet, np.ndarray]] = {}

    def arrivals_s(self, gpus: np.ndarray, from_stage: int, send_s: np.ndarray) -> np.ndarray:
        """When each of ``gpus`` ([group, ep rank], of one stage) has its input sent by its
        peer on ``from_stage`` at ``send_s`` (per ep rank), each GPU receiving its own copy."""
        flat = np.asarray(gpus, dtype=np.int64).ravel()
        start_s = np.broadcast_to(send_s, np.shape(gpus)).ravel()
        rs, copies = self._route(flat, from_stage)
        links = np.unique(rs.link)
        rows = self.load.on(links, float(start_s.min()))
        cap = self.base.fabric.cap_Bps
        out = np.empty(flat.size)
        where = np.full(links.size, -1, dtype=np.int64)  # link index -> route position
        for c in range(flat.size):
            mine = rs.link[rs.ptr[c]:rs.ptr[c + 1]]
            pos = np.searchsorted(links, mine)
            where[pos] = np.arange(mine.size)
            keep = where[rows.link] >= 0
            sub = rows.take(keep, where[rows.link[keep]])
            where[pos] = -1
            out[c] = share_drain_s(float(start_s[c]), self.size, cap[mine], copies[mine], sub)
        return (out + rs.latency_s).reshape(np.shape(gpus))

    def _route(self, flat: np.ndarray, from_stage: int) -> tuple[RouteSet, np.ndarray]:
        """The copies' routes and how many copies cross each link (cached per stage pair)."""
        key = (from_stage, int(flat[0]) // self.per)
        if key not in self._routes:
            src = flat + (from_stage - key[1]) * self.per
            rs = self.base.routes(src, flat)
            copies = np.bincount(rs.link, weights=rs.weight, minlength=self.base.fabric.n_links)
            self._routes[key] = (rs, copies)
        return self._routes[key]
