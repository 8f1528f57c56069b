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
member starts no earlier than that pass), and the phase flows slowed by the send. Each
replica's send starts when it got the last bytes of its sender's last all-to-all (after the
first member that did: the sending group's next phase starts with the representative).

A phase with late members is not solved again (each pass's delays differ, so no solve would
be shared): its rows move later by their senders' delays and it ends no earlier than the
link-load bound of the late rows (:func:`late_end_s`), which decides the end when the last
members send after the others' rows have drained (full mode at 256 GPUs: that dispatch ends
4 ms after its last sender). Against the phase solved with the delays: -1.4 % .. +0.4 % on
12 draws (``tests/test_step_replica_inputs.py``).

Measured (2026-12-07, ``tests/test_step_congestion.py``'s specs, full / fast before -> after,
ms): 512 GPUs 4:1 ECMP 2769.61 / 2588.88 -> 2675.31 (-6.5 % -> -3.4 %), 256 GPUs 2084.48 /
2006.85 -> 2055.91 (-3.7 % -> -1.4 %), 128 GPUs 1686.06 / 1657.35 -> 1681.47 (-1.7 % ->
-0.3 %); with every replica's send started with the representative's: 2656.06 ms at 512
GPUs (-4.1 %). The whole matrix: benchmarks/congestion_matrix.py.

Cost: nothing on the congestion cases (512 GPUs 4:1 ECMP 7.1 s of CPU, 7.2 before), but a
query per pass with an input, over every phase still running on its links: the 1,024-GPU
``benchmarks/bench_step.py --phases fabric`` step (256 micro-batches, four MoE layers per
stage) took 118.1 s of CPU against 6.1 s (one run each, loaded machine). So the phases run
it only under ECMP, where replicas' sends collide (:func:`moesim.step.replicas.replicas_collide`);
that step (D-mod-K) is unchanged. Large ECMP steps with the phases pay it: what is left.
:func:`drains_s` sorts the change times once and carries their ranks to the queries (the
same results, bit for bit): that step under ECMP, ``Fast(phases="fabric")``, CPU 82.3 ->
67.7 s with 64 micro-batches, 61.1 -> 57.0 s with 16 (medians of 2; loaded machine).
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from moesim.engine.copies import CopiesRouter
from moesim.engine.routing import Router, RouteSet


@dataclass(frozen=True)
class LinkRows:
    """Flows on links over time: row ``i`` puts ``count[i]`` flows moving ``load_Bps[i]`` in
    all on link ``link[i]`` over ``[start_s[i], end_s[i])``, sent by ep rank ``sender[i]``."""

    link: np.ndarray
    count: np.ndarray
    load_Bps: np.ndarray
    start_s: np.ndarray
    end_s: np.ndarray
    sender: np.ndarray

    @cached_property
    def links(self) -> np.ndarray:
        """The links the rows are on, sorted (once per rows: a phase's are shared by its
        micro-batches)."""
        return np.unique(self.link)

    def take(self, keep: np.ndarray, link: np.ndarray, shift_s: float = 0.0) -> LinkRows:
        """The rows ``keep`` with links ``link`` (renumbered), times moved by ``shift_s``."""
        return LinkRows(link, self.count[keep], self.load_Bps[keep],
                        self.start_s[keep] + shift_s, self.end_s[keep] + shift_s,
                        self.sender[keep])

    def delayed(self, late_s: np.ndarray) -> LinkRows:
        """Each sender's rows moved ``late_s[sender]`` later (at the rates they had)."""
        by = late_s[self.sender]
        moved = LinkRows(self.link, self.count, self.load_Bps, self.start_s + by,
                         self.end_s + by, self.sender)
        moved.__dict__["links"] = self.links  # the same links
        return moved


def flow_rows(router: CopiesRouter, flows: np.ndarray) -> LinkRows:
    """The rows of a phase's solved flows (``flows``: src, dst, size, start, drain per
    column, endpoint ids of ``router``) on ``router``'s links, each at its mean rate."""
    src, dst, size, start, drain = flows
    live = (size > 0) & (drain > start)
    rs = router.routes(src[live].astype(np.int64), dst[live].astype(np.int64))
    owner = np.repeat(np.arange(int(live.sum())), np.diff(rs.ptr))
    rate = (size[live] / (drain[live] - start[live]))[owner]
    return LinkRows(rs.link, rs.weight, rs.weight * rate, start[live][owner],
                    drain[live][owner], src[live].astype(np.int64)[owner])


def late_end_s(rows: LinkRows, release_s: np.ndarray, cap_Bps: np.ndarray) -> float:
    """A lower bound on a phase's last byte when ep rank ``e`` sends its row (the bytes of
    its flows in ``rows``) from ``release_s[e]``: the bytes sent from the ``k``-th latest
    release on cannot cross a link faster than its capacity, ``max_k,l release_(k) +
    bytes_k,l / cap_l`` (the link-load bound; path latencies, microseconds, left out)."""
    links, at = np.unique(rows.link, return_inverse=True)
    n = release_s.size
    sent = np.zeros((n, links.size))
    np.add.at(sent, (rows.sender, at), rows.load_Bps * (rows.end_s - rows.start_s))
    order = np.argsort(-release_s, kind="stable")
    after = np.cumsum(sent[order], axis=0)  # [k, link]: bytes of the k + 1 latest senders
    return float((release_s[order][:, None] + after / cap_Bps[links]).max())


def share_drain_s(t0_s: float, size_bytes: float, cap_Bps: np.ndarray, copies: np.ndarray,
                  rows: LinkRows) -> float:
    """When a flow of ``size_bytes`` started at ``t0_s`` on a route of links with capacities
    ``cap_Bps`` drains, sharing link ``l`` with ``copies[l]`` flows like it (itself included)
    throughout and with the flows ``rows`` (``link``: the position on the route) while they
    run: at each instant the least over its links of the level
    ``max((cap - load) / copies, cap / (count + copies))`` (module docstring)."""
    hops = np.arange(cap_Bps.size)[None, :]
    return float(drains_s(np.array([t0_s]), size_bytes, cap_Bps, copies, hops, rows)[0])


def drains_s(t0_s: np.ndarray, size_bytes: float, cap_Bps: np.ndarray, copies: np.ndarray,
             hops: np.ndarray, rows: LinkRows) -> np.ndarray:
    """:func:`share_drain_s` of many flows at once: flow ``c`` starts at ``t0_s[c]`` on the
    links ``hops[c]`` (``-1``: no hop); link ``u`` (the rows' numbering) has capacity
    ``cap_Bps[u]`` and ``copies[u]`` flows like them. Each link's level changes only where
    its own rows start or end, so each flow is timed on the times of its own links."""
    live = rows.end_s > t0_s.min()
    link = np.concatenate((rows.link[live], rows.link[live]))
    t = np.concatenate((np.maximum(rows.start_s[live], t0_s.min()), rows.end_s[live]))
    d_count = np.concatenate((rows.count[live], -rows.count[live]))
    d_load = np.concatenate((rows.load_Bps[live], -rows.load_Bps[live]))
    order, below, upto_t, grid = _by_link_time(t, link)
    link, t, d_count, d_load = link[order], t[order], d_count[order], d_load[order]
    n = cap_Bps.size
    first = np.searchsorted(link, np.arange(n))
    last = np.searchsorted(link, np.arange(n), side="right")
    count, load = _segment_cumsum(d_count, first, link), _segment_cumsum(d_load, first, link)
    cap, share = cap_Bps[link], copies[link]
    level = np.maximum(np.maximum(cap - load, 0.0) / share, cap / (count + share))
    idle = cap_Bps / copies  # before a link's first row
    # each flow's times: its start and its links' changes after it, in order
    n_flows, n_hops = hops.shape
    owner, hop_link = np.nonzero(hops >= 0)[0], hops[hops >= 0]
    lens = last[hop_link] - first[hop_link]
    owners = np.repeat(owner, lens)
    at = np.arange(int(lens.sum())) - np.repeat(np.cumsum(lens) - lens, lens)
    change = np.repeat(first[hop_link], lens) + at
    flow = np.concatenate((owners, np.arange(n_flows)))
    times = np.concatenate((t[change], t0_s))
    upto = np.concatenate((upto_t[change], np.searchsorted(grid, t0_s, side="right") - 1))
    keep = times >= t0_s[flow]
    flow, times, upto = flow[keep], times[keep], upto[keep]
    order = _lexsort(times, flow)
    flow, times, upto = flow[order], times[order], upto[order]
    new = np.ones(flow.size, dtype=bool)
    new[1:] = (flow[1:] != flow[:-1]) | (times[1:] != times[:-1])
    flow, times, upto = flow[new], times[new], upto[new]
    # every hop's level at those times: its link's last change at or before each
    # (ranks in the sorted change times ``grid``: a change at t is at or before a time T
    # exactly when the changes before t are fewer than those at or before T)
    key = below + link * (grid.size + 1)
    levels = np.r_[level, 0.0]  # (0.0: not read)
    rate = np.full(flow.size, np.inf)
    for h in range(n_hops):
        u = hops[flow, h]
        on = u >= 0
        k = np.searchsorted(key, upto[on] + u[on] * (grid.size + 1), side="right") - 1
        mine = k >= first[u[on]]
        got = levels[np.where(mine, k, level.size)]
        rate[on] = np.minimum(rate[on], np.where(mine, got, idle[u[on]]))
    # bytes moved by each time, flow by flow; the last interval of each flow open
    start = np.flatnonzero(np.r_[True, flow[1:] != flow[:-1]])
    end = np.r_[start[1:], flow.size] - 1
    dt = np.r_[np.diff(times), 0.0]
    dt[end] = 0.0
    after = np.cumsum(rate * dt)  # moved by the end of each interval
    before = after - rate * dt
    j = np.minimum(np.searchsorted(after, before[start] + size_bytes), end)
    return times[j] + (before[start] + size_bytes - before[j]) / rate[j]


def _by_link_time(t: np.ndarray, link: np.ndarray
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``np.lexsort((t, link))``, and in that order how many of ``t`` are below each and how
    many at or below it less one, and ``t`` sorted."""
    by_t = np.argsort(t, kind="stable")
    grid = t[by_t]
    new = np.r_[True, grid[1:] != grid[:-1]] if grid.size else np.zeros(0, dtype=bool)
    starts = np.flatnonzero(new)
    group = np.cumsum(new) - 1
    below, upto = starts[group], np.r_[starts[1:], grid.size][group] - 1
    by = _narrow(link[by_t])
    then = np.argsort(by, kind="stable")
    return by_t[then], below[then], upto[then], grid


def _lexsort(minor: np.ndarray, major: np.ndarray) -> np.ndarray:
    """``np.lexsort((minor, major))`` (stable: the same order) as two stable argsorts, the
    second on ``major`` as int16 where it fits (numpy radix-sorts those)."""
    order = np.argsort(minor, kind="stable")
    return order[np.argsort(_narrow(major[order]), kind="stable")]


def _narrow(x: np.ndarray) -> np.ndarray:
    """``x`` (integers) as int16 where they fit: numpy's stable argsort radix-sorts those."""
    return x.astype(np.int16) if x.size and x.min() >= 0 and x.max() < 2**15 else x


def _segment_cumsum(x: np.ndarray, first: np.ndarray, seg: np.ndarray) -> np.ndarray:
    """Running sums of ``x`` restarting at each segment (``seg``: each element's, sorted;
    ``first``: where each segment starts)."""
    if not x.size:
        return x
    total = np.cumsum(x)
    base = np.where(first > 0, total[np.maximum(first - 1, 0)], 0.0)
    return total - base[seg]


class LinkLoad:
    """The all-to-all phases' flows on the step's clock (:class:`LinkRows` per phase), kept
    in order of their last end, each with its links."""

    def __init__(self, n_links: int) -> None:
        self._ends: list[float] = []
        self._parts: list[tuple[float, LinkRows, np.ndarray]] = []  # (t0, rows, its links)
        self._mask = np.zeros(n_links, dtype=bool)

    def add(self, rows: LinkRows, t0_s: float) -> None:
        """A phase whose rows' times count from ``t0_s``."""
        if rows.link.size:
            last = t0_s + float(rows.end_s.max())
            at = bisect.bisect(self._ends, last)
            self._ends.insert(at, last)
            self._parts.insert(at, (t0_s, rows, rows.links))

    def on(self, links: np.ndarray, after_s: float) -> LinkRows:
        """The rows on ``links`` (sorted, unique; each row's link its index there) that run
        past ``after_s``, on the step's clock."""
        self._mask[links] = True
        parts = []
        for t0, rows, mine in self._parts[bisect.bisect(self._ends, after_s):]:
            if self._mask[mine].any():
                keep = self._mask[rows.link] & (rows.end_s + t0 > after_s)
                parts.append(rows.take(keep, np.searchsorted(links, rows.link[keep]), t0))
        self._mask[links] = False
        if not parts:
            empty = np.zeros(0)
            return LinkRows(*(empty.astype(np.int64), empty, empty, empty, empty,
                              empty.astype(np.int64)))
        return LinkRows(*(np.concatenate([getattr(p, f) for p in parts]) for f in (
            "link", "count", "load_Bps", "start_s", "end_s", "sender")))


class ReplicaInputs:
    """Every replica's copy of a pipeline send on its own route beside :attr:`load` (module
    docstring); ``per_stage`` GPUs per stage, ranks of one stage contiguous (a peer on
    another stage: the same tp, cp and dp coordinates)."""

    def __init__(self, base: Router, per_stage: int, size_bytes: float) -> None:
        self.base, self.per, self.size = base, per_stage, size_bytes
        self.load = LinkLoad(base.fabric.n_links)
        self._routes: dict[tuple[int, int], tuple[tuple[RouteSet, np.ndarray], np.ndarray]] = {}

    def arrivals_s(self, gpus: np.ndarray, from_stage: int, send_s: np.ndarray) -> np.ndarray:
        """When each of ``gpus`` ([group, ep rank], of one stage) has its input sent by its
        peer on ``from_stage`` at ``send_s`` (per ep rank), each GPU receiving its own copy."""
        flat = np.asarray(gpus, dtype=np.int64).ravel()
        start_s = np.broadcast_to(send_s, np.shape(gpus)).ravel().astype(float)
        (rs, copies), hops = self._route(flat, from_stage)
        links = np.unique(rs.link)
        rows = self.load.on(links, float(start_s.min()))
        cap = self.base.fabric.cap_Bps
        at = drains_s(start_s, self.size, cap[links], copies[links], hops, rows)
        return (at + rs.latency_s).reshape(np.shape(gpus))

    def _route(self, flat: np.ndarray, from_stage: int
               ) -> tuple[tuple[RouteSet, np.ndarray], np.ndarray]:
        """The copies' routes, how many copies cross each link, and each copy's hops as
        indices into the routes' sorted links ([copy, hop], -1 past its last; cached per
        stage pair)."""
        key = (from_stage, int(flat[0]) // self.per)
        if key not in self._routes:
            src = flat + (from_stage - key[1]) * self.per
            rs = self.base.routes(src, flat)
            copies = np.bincount(rs.link, weights=rs.weight, minlength=self.base.fabric.n_links)
            lens = np.diff(rs.ptr)
            hops = np.full((flat.size, int(lens.max(initial=0))), -1, dtype=np.int64)
            rows = np.repeat(np.arange(flat.size), lens)
            hops[rows, np.arange(rs.link.size) - rs.ptr[rows]] = np.searchsorted(
                np.unique(rs.link), rs.link)
            self._routes[key] = ((rs, copies), hops)
        return self._routes[key]
