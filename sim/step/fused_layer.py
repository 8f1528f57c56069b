"""A pipeline stage's layer in fast mode, for its TP / CP members at once, in closed form.

Fast mode (:mod:`moesim.step.fast`) runs one representative pipeline: stage ``p`` is the
``tp x cp`` ranks of dense-grid ``dp == 0``. With ``tp`` or ``cp`` above 1, every layer of a
micro-batch pass is a chain of TP ring collectives (:mod:`moesim.step.tpcp`), ring-attention
K/V sends, compute and all-to-alls, run by :mod:`moesim.step.program` as one SimPy process
per rank with a collective object per ring (thousands of events per layer and ~100k flows
per candidate of a design). Where nothing but those members' own TP / CP traffic crosses
their NVLink links (:func:`rings_alone`), the whole layer is a function of
the members' start times, computed when the last member reaches the layer (as
:class:`moesim.collectives.fused_ring.FusedRing` does for one ring), member by member
vectorised:

* compute: ``t += time x slowdown`` (the event path's ``_compute``);
* a TP ring all-gather / reduce-scatter of each TP group: the ring schedule's recursion
  (:func:`moesim.collectives.fused_ring.ring_schedule_s`; exact against rings of flows);
* a ring-attention step: each member sends its K/V chunk to its CP successor at its own
  time, alone on its links, so it lands ``size / rate + latency`` later (a flow alone drains
  at its route's idle rate: :mod:`moesim.engine.solo`); the member waits for its
  predecessor's chunk after its ``1/cp`` of the core;
* an all-to-all: the first member of the EP group to send fixes the group's reference time
  and every member leaves at ``max(its send, end)``
  (:class:`moesim.step.fast.FastAllToAll`, :meth:`moesim.step.fast.FastState.a2a_arrival_s`).

Each wait is booked to the category the event path books it to (``tp_exposed``,
``cp_exposed``, ``a2a_exposed``). Exactness needs each transfer alone on its links. Within
one collective the links must be disjoint (a ring edge or CP send per sender and receiver;
else :class:`NotAlone` and fast mode runs the step with flows:
:func:`moesim.step.fast.simulate_fast`). Across collectives :class:`LinkClock` keeps when
each link last drains: a transfer that would start while an earlier collective's last chunk
still drains on one of its links (members that reach a ring far apart: a slow GPU, full
recompute's per-expert-rank forward) starts after it (FIFO), where the flow path shares the
link (the earlier chunk lands later, the later one no later: max-min sharing is work
conserving). Then the closed form is no longer exact: the error bound stated and tested is
the sum of those late starts (``LinkClock.late_s``; measured: a TP2 step with a GPU at 1.5x,
step -0.043 % vs the flow path, 2.3 us of a 113 us bound). Where nothing starts late (every
tested layout with members in step: TP2, TP4, CP2, TP2 x CP2, interleaved, a slow GPU in a
CP pair) it equals the flow path to 1e-9 (``tests/test_step_fused_layer.py``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import simpy

from moesim.collectives.base import RankStarted
from moesim.collectives.fused_ring import ring_schedule_s
from moesim.engine.fabric import load_links
from moesim.engine.routing import Router
from moesim.fabric.subfabric import GraphIndex
from moesim.parallel.layout import ParallelLayout
from moesim.schedule.ops import ScheduleOps
from moesim.step.fused_apart import cp_watch, shared_links
from moesim.step.groups import group
from moesim.step.plan import LayerPlan
from moesim.step.spec import StepSpec
from moesim.step.state import CATEGORIES, StepState

COMPUTE, A2A, TP, CP = (CATEGORIES.index(c) for c in ("compute", "a2a_exposed", "tp_exposed",
                                                      "cp_exposed"))


class NotAlone(Exception):
    """Two TP / CP transfers of the closed form would share a link at once."""


class LinkClock:
    """When each link of the fabric last drains a fused transfer (implied links as their
    partner, as the rate solver counts them)."""

    def __init__(self, router: Router, watch: np.ndarray | None = None) -> None:
        self.router = router
        self.load_of = load_links(router.fabric)
        self.busy_s = np.full(self.load_of.size, -np.inf)
        self.late_s = 0.0  # transfers started late, summed: the closed form's error bound
        self.late_n = 0
        self.watch = watch  # per link: log its transfers' intervals (fused_apart.py)
        self.held: list[tuple[np.ndarray, ...]] | None = None  # set to a list: log (links,
        # start_s, drain_s) of transfers on watched links (fused_apart.overlap_s; tests)

    def edges(self, src: np.ndarray, dst: np.ndarray) -> Edges:
        """The pairs ``src[i] -> dst[i]``, one transfer each at a time; NotAlone when two of
        them share a link (they could not run alone)."""
        rs = self.router.routes(src, dst)
        links = self.load_of[rs.link]
        owner = np.repeat(np.arange(src.size), np.diff(rs.ptr))
        if (np.diff(rs.ptr) < 1).any():
            raise NotAlone("a TP / CP transfer without links")
        if len(set(links.tolist())) == links.size:  # (np.unique imports numpy.ma)
            return Edges(rs.cap_Bps, rs.latency_s, links, owner, rs.ptr[:-1])
        held = list(dict.fromkeys(zip(owner.tolist(), links.tolist(), strict=True)))
        if self.watch is None or len({link for _, link in held}) < len(held):
            raise NotAlone("transfers of one TP / CP collective share a link")
        owner, links = (np.array(col, dtype=np.int64) for col in zip(*held, strict=True))
        first = np.searchsorted(owner, np.arange(src.size))  # a link and its implied partner
        return Edges(rs.cap_Bps, rs.latency_s, links, owner, first)  # on one route: once

    def free_s(self, edges: Edges, start_s: np.ndarray) -> np.ndarray:
        """When each edge can start: ``start_s``, or later while a transfer of an earlier
        collective still drains on one of its links (that transfer then goes first: FIFO,
        module docstring; the wait is added to :attr:`late_s` and counted)."""
        held = self.busy_s[edges.links]
        if held.max() <= start_s.min():
            return start_s
        busy = np.maximum.reduceat(held, edges.first)
        late = busy > start_s
        if late.any():
            self.late_s += float((busy - start_s)[late].sum())
            self.late_n += int(late.sum())
            return np.where(late, busy, start_s)
        return start_s

    def hold(self, edges: Edges, drain_s: np.ndarray, start_s: np.ndarray | None = None
             ) -> None:
        """Each edge's links carry its transfer until ``drain_s``. On :attr:`watch` links the
        transfer is logged from ``start_s`` instead (a transfer without one must not cross
        them) and never makes a later one wait: :mod:`moesim.step.fused_apart` checks them."""
        if self.watch is None or not (on := self.watch[edges.links]).any():
            self.busy_s[edges.links] = drain_s[edges.owner]
            return
        if start_s is None:
            raise NotAlone("a TP transfer on a watched link")
        off, who = ~on, edges.owner[on]
        self.busy_s[edges.links[off]] = drain_s[edges.owner[off]]
        if self.held is not None:
            self.held.append((edges.links[on], start_s[who], drain_s[who]))


@dataclass(frozen=True)
class Edges:
    """Transfers ``i``: idle rate, path latency; their links with the transfer of each."""

    cap_Bps: np.ndarray
    latency_s: np.ndarray
    links: np.ndarray
    owner: np.ndarray
    first: np.ndarray  # where each transfer's links start in ``links``


def sends_apart(lay: ParallelLayout, router: Router) -> bool:
    """Whether no pipeline send between the representative's stages (dense-grid ``dp == 0``,
    either direction, the interleaved wrap-around included) crosses a link that a TP or CP
    transfer between its members uses: then only those transfers cross their links (a
    stage on whole NVLink domains always qualifies; stages that share a host qualify when
    their ``dp == 0`` ranks sit on different hosts). :func:`shared_links`."""
    return not shared_links(lay, router, ("tp", "cp")).size


class StageGroups:
    """A stage's representative members (rank order) and their TP rings, CP rings and EP
    groups as index arrays into them (one per stage, kept by the fast state)."""

    def __init__(self, st: StepState, members: Sequence[int], clock: LinkClock) -> None:
        lay = st.spec.layout
        self.members = np.asarray(members, dtype=np.int64)
        pos = {int(r): i for i, r in enumerate(self.members)}
        self.ep = np.array([st.coords[r]["ep"] for r in members], dtype=np.int64)
        self.slow = st.slowdown[self.members]
        self.tp, self.cp, self.clock = lay.tp, lay.cp, clock
        self.tp_pred, self.tp_edges = self._ring(clock, lay, "tp", pos)
        self.cp_pred, self.cp_edges = self._ring(clock, lay, "cp", pos)
        self.tp_chunk_s = st.plan.tp_bytes / lay.tp / self.tp_edges.cap_Bps
        firsts: dict[int, list[int]] = {}
        for i, r in enumerate(members):
            firsts.setdefault(st.ep_group[r][0], []).append(i)
        self.ep_idx = [np.array(v) for v in firsts.values()]

    def _ring(self, clock: LinkClock, lay: ParallelLayout, kind: str, pos: dict[int, int]
              ) -> tuple[np.ndarray, Edges]:
        """(predecessor of each member, edge member -> successor) of its ``kind`` ring."""
        rings = [group(lay, kind, int(r)) for r in self.members]
        succ = np.array([pos[g[(g.index(int(r)) + 1) % len(g)]]
                         for r, g in zip(self.members, rings, strict=True)])
        pred = np.empty_like(succ)
        pred[succ] = np.arange(succ.size)
        if len(rings[0]) == 1:
            none = np.zeros(0, dtype=np.int64)
            return pred, Edges(np.ones(succ.size), np.zeros(succ.size), none, none, none)
        return pred, clock.edges(self.members, self.members[succ])


class FusedLayer(RankStarted):
    """One layer pass (``backward`` or not) of micro-batch ``mb`` for a stage's members."""

    def __init__(self, st: StepState, stage: StageGroups, layer: LayerPlan, mb: int,
                 backward: bool) -> None:
        self.st, self.g, self.layer, self.mb, self.backward = st, stage, layer, mb, backward
        n = stage.members.size
        self.rank_done: list[simpy.Event] = [st.env.event() for _ in range(n)]
        self._init_ranks(n)
        self._start_s = np.zeros(n)
        self.waiting = n  # members yet to start

    def _on_start(self, local: int) -> None:
        self._start_s[local] = self.st.env.now
        self.waiting -= 1
        if not self.waiting:
            self._finish()

    def _finish(self) -> None:
        st, n = self.st, self.g.members.size
        book = np.zeros((n, len(CATEGORIES)))
        ends = LayerTimes(st, self.g, self.layer, self.mb, book).run(self._start_s,
                                                                      self.backward)
        now = st.env.now
        for local, rank in enumerate(self.g.members.tolist()):
            st.ledger[rank] += book[local]
            event, end_s = self.rank_done[local], float(ends[local])
            event._ok, event._value = True, end_s  # it succeeds at end_s: one event, not two
            st.env.schedule(event, simpy.events.NORMAL, max(end_s - now, 0.0))


class LayerTimes:
    """The event path of :mod:`moesim.step.program` for one layer, member-vectorised."""

    def __init__(self, st: StepState, g: StageGroups, layer: LayerPlan, mb: int,
                 book: np.ndarray) -> None:
        self.st, self.g, self.layer, self.mb, self.book = st, g, layer, mb, book

    def run(self, t: np.ndarray, backward: bool) -> np.ndarray:
        layer, e = self.layer, self.g.ep
        c = layer.moe
        if not backward:
            if c is None:
                t = self.attention(t, layer.dense_fwd_s - layer.ffn_fwd_s, 0.0,
                                   layer.core_fwd_s, False)
                return self.tp_block(t, layer.ffn_fwd_s)
            t = self.attention(t, c.attn_fwd[e], c.router[e], layer.core_fwd_s, False)
            t = self.a2a(t, "dispatch")
            t = self.compute(t, c.experts_fwd[e])
            t = self.a2a(t, "combine")
            t = self.compute(t, c.unpermute[e])
            return self.tp_block(t, layer.ffn_fwd_s) if layer.ffn_fwd_s else t
        if layer.recompute_s is not None:
            t = self.compute(t, layer.recompute_s[e if c is not None else np.zeros_like(e)])
        if c is None:
            t = self.tp_block(t, layer.ffn_bwd_s)
            return self.attention(t, layer.dense_bwd_s - layer.ffn_bwd_s, 0.0,
                                  layer.core_bwd_s, True)
        if layer.ffn_bwd_s:
            t = self.tp_block(t, layer.ffn_bwd_s)
        t = self.a2a(t, "combine_bwd")
        t = self.compute(t, c.experts_bwd[e])
        t = self.a2a(t, "dispatch_bwd")
        return self.attention(t, c.attn_bwd[e], 0.0, layer.core_bwd_s, True)

    def compute(self, t: np.ndarray, time_s: np.ndarray | float) -> np.ndarray:
        dt = np.asarray(time_s, dtype=float) * self.g.slow
        self.book[:, COMPUTE] += dt
        return t + dt

    def wait(self, t: np.ndarray, until_s: np.ndarray, category: int) -> np.ndarray:
        end = np.maximum(t, until_s)
        self.book[:, category] += end - t
        return end

    def tp_ring(self, t: np.ndarray) -> np.ndarray:
        """One TP all-gather or reduce-scatter of ``plan.tp_bytes`` in every TP group."""
        g = self.g
        clock = self.g.clock
        first = clock.free_s(g.tp_edges, t)
        ends, drain = ring_schedule_s(t, g.tp_chunk_s, g.tp_edges.latency_s, g.tp_pred, g.tp,
                                      first)
        clock.hold(g.tp_edges, drain)
        return self.wait(t, ends, TP)

    def tp_block(self, t: np.ndarray, time_s: float) -> np.ndarray:
        """A TP-sharded block: all-gather, compute, reduce-scatter (tp > 1 only)."""
        if self.g.tp > 1:
            t = self.tp_ring(t)
        t = self.compute(t, time_s)
        return self.tp_ring(t) if self.g.tp > 1 else t

    def attention(self, t: np.ndarray, time_s: np.ndarray | float, after_s: np.ndarray | float,
                  core_s: float, bwd: bool) -> np.ndarray:
        g = self.g
        if g.tp > 1:
            t = self.tp_ring(t)
        if g.cp == 1:
            t = self.compute(t, time_s)
        else:
            t = self.compute(t, np.asarray(time_s, dtype=float) - core_s)
            size = self.st.plan.cp_kv_bytes * (2 if bwd else 1)
            edges = g.cp_edges
            for step in range(g.cp):
                if step < g.cp - 1:
                    start = self.g.clock.free_s(edges, t)
                    drain = start + size / edges.cap_Bps
                    self.g.clock.hold(edges, drain, start)
                    landed = (drain + edges.latency_s)[g.cp_pred]  # from my predecessor
                t = self.compute(t, core_s / g.cp)
                if step < g.cp - 1:
                    t = self.wait(t, landed, CP)
        if g.tp > 1:
            t = self.tp_ring(t)
        return self.compute(t, after_s) if np.any(after_s) else t

    def a2a(self, t: np.ndarray, phase: str) -> np.ndarray:
        """The EP group's first sender fixes its reference time; all leave at its end."""
        until = t.copy()
        for idx in self.g.ep_idx:
            first = int(idx[np.argmin(t[idx])])
            rank = int(self.g.members[first])
            arrival = self.st.a2a_arrival_s(rank, self.layer, self.mb, phase, float(t[first]))
            until[idx] = max(arrival, float(t[first]))
        return self.wait(t, until, A2A)


def nvlink_alone(spec: StepSpec, ops: ScheduleOps, apart: bool) -> bool:
    """Whether only the representative's own TP / CP transfers cross its NVLink links: its
    all-to-alls and DP rings are estimates (no flows), and here no other flow crosses NVLink:
    no PXN (cross-rail sends relayed over NVLink), pipeline sends on other links (``apart``:
    :func:`moesim.step.fused_layer.sends_apart`), one pass at a time on a rank (no overlapped
    FB ops, whose two passes' collectives could meet)."""
    lay = spec.layout
    overlapped = spec.fb_overlap and any(op.kind == "FB" for s in range(lay.pp)
                                         for op in ops[s])
    return not spec.fabric.pxn and not overlapped and apart


def rings_alone(spec: StepSpec, ops: ScheduleOps, apart: bool) -> bool:
    """Whether a TP / ETP ring of fast mode's representative has its NVLink links to itself:
    :func:`nvlink_alone` and no CP K/V sends (rings fused one by one do not see them)."""
    return spec.layout.cp == 1 and nvlink_alone(spec, ops, apart)


def layers_fused(spec: StepSpec, ops: ScheduleOps, apart: bool) -> bool:
    """Whether fast mode times each layer of a stage's TP / CP members in closed form
    (:mod:`moesim.step.fused_layer`): tp or cp above 1, experts without TP (etp 1), and
    :func:`nvlink_alone`."""
    lay = spec.layout
    return lay.tp * lay.cp > 1 and lay.etp == 1 and nvlink_alone(spec, ops, apart)


def fusion(spec: StepSpec, ops: ScheduleOps, index: GraphIndex, router: Router, fuse_tp: bool,
           fuse_moe: bool) -> tuple[bool, bool, np.ndarray | None]:
    """(TP rings fused one by one: :func:`rings_alone`, layers fused: :func:`layers_fused`,
    the links whose CP sends are logged and timed alone: :func:`cp_watch` or None) for fast
    mode's representative (``fuse_tp``: closed forms allowed, no replicas)."""
    apart = (fuse_tp and index.graph.graph.get("nvlink_domain_size") is not None
             and sends_apart(spec.layout, router))
    watch = None if apart or not fuse_tp else cp_watch(index, spec.layout, router)
    layers = fuse_tp and fuse_moe and layers_fused(spec, ops, apart or watch is not None)
    return fuse_tp and not layers and rings_alone(spec, ops, apart), layers, (
        watch if layers else None)
