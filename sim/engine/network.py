"""Flows on a fabric inside a SimPy environment, sharing links max-min fairly.

A transfer is a flow routed over directed links. Between events every active
flow moves at a constant rate; rates are re-solved (:mod:`moesim.engine.ratesolver`,
:mod:`moesim.engine.maxmin`) only when the set of active flows changes, and at most
once per simulated instant: starts and finishes at one timestamp are batched
into a single solve, which runs at ``LATE`` priority, after every ordinary event
of that instant. A solve re-computes only the flows whose rates the change can
reach; the others keep their rates exactly.

A flow's last byte arrives ``latency_s`` (its path latency) after it drains. Flows that start
alone on their links (no other flow, solved or not, on any of them) are timed in closed form
(:mod:`moesim.engine.solo`, :mod:`moesim.engine.solorun`) until a flow joins one of their
links.

Finish batching (``batch_window_rel`` = eps > 0) trades exactness for fewer
solves (:mod:`moesim.engine.batching`): flows due to drain close together finish in
one batch, each at its own drain time under the current rates, and the capacity
they free is handed out at the batch's end, at most eps x (the age of the
youngest flow on their links) late. eps = 0 is the exact fluid max-min model.
What is tested (``tests/test_engine_batching.py``): on random single-wave
all-to-alls (groups per source or per destination, ECMP, D-mod-K and spray,
eps from 0.01 to 0.2), every group's completion time is within eps x (its
duration) of the exact one (about 0.5-0.8 eps is typical); eps = 0 runs are
repeatable bit for bit. When separate collectives overlap in time the fluid model
can amplify a small delay (a flow that finishes later shares a link with a new
wave for longer), and errors up to about 3 eps have been seen in random
multi-wave cases: compare against eps = 0 before trusting eps > 0 there.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import simpy

from moesim.engine import batching
from moesim.engine.active import ActiveFlows
from moesim.engine.fabric import Fabric, implied_partner, load_links
from moesim.engine.flowtable import FLOW_COLUMNS, Columns, PairStore
from moesim.engine.groups import CompletionGroups
from moesim.engine.joins import JoinRoutes
from moesim.engine.late import LateEvent
from moesim.engine.linkstats import LinkStats
from moesim.engine.observe import Observed
from moesim.engine.ratesolver import RateSolver
from moesim.engine.routing import Router
from moesim.engine.solo import SoloSet
from moesim.engine.solorun import SoloFlows

ROUTED_STARTS = 4096
"""Routes of at most this many distinct starts (source and destination arrays) are kept for
reuse (:meth:`FlowNetwork._route`); past it the memo starts afresh."""


class FlowNetwork(Observed, SoloFlows):
    """Runs flows over ``router``'s fabric in ``env``.

    Use :meth:`expect` to make a completion group, then :meth:`start` flows
    into it; the group's event fires when its last flow's last byte arrives,
    with that flow's id as value.
    """

    def __init__(
        self,
        env: simpy.Environment,
        router: Router,
        *,
        batch_window_rel: float = 0.0,
        record_timeline: bool = True,
    ) -> None:
        if batch_window_rel < 0:
            raise ValueError("batch_window_rel must be >= 0")
        self.env = env
        self.router = router
        self.fabric: Fabric = router.fabric
        self.eps = batch_window_rel
        self.flows = Columns(FLOW_COLUMNS)
        self.pairs = PairStore()
        self.stats = LinkStats(self.fabric.cap_Bps, record_timeline)
        self.solves = 0
        n_links = self.fabric.n_links
        partner = implied_partner(self.fabric)
        solve_map = np.where(partner >= 0, n_links, np.arange(n_links))
        self._load_of = load_links(self.fabric)
        self.active = ActiveFlows(n_links, np.append(solve_map, n_links))
        self.rates = RateSolver(self.fabric.cap_Bps)
        self._flows_on = np.zeros(n_links, dtype=np.int64)
        self._young = np.full(n_links + 1, -np.inf)
        self._pending: list[np.ndarray] = []
        self._load = np.zeros(self.fabric.n_links)
        self._t_last = 0.0
        self._gen = 0
        self._flush_at: float | None = None
        self.groups = CompletionGroups(env)
        self._solos = SoloSet(n_links)  # flows alone on their links (moesim.engine.solo)
        self._replaying = False  # _materialize: solved flows joining as of their start
        self._routed: dict[tuple[bytes, bytes], tuple[np.ndarray, ...]] = {}  # _route
        self._joins = JoinRoutes(self.active, self.flows, self._pairs)
        self._init_observers()

    # ---------------------------------------------------------------- API
    def expect(self, n_flows: int) -> tuple[int, simpy.Event]:
        """A completion group awaiting ``n_flows`` flows; returns (group id, event)."""
        return self.groups.expect(n_flows)

    def expect_many(self, count: int, n_flows: int) -> tuple[np.ndarray, list[simpy.Event]]:
        """``count`` groups of ``n_flows`` flows each (:meth:`expect` ``count`` times)."""
        return self.groups.expect_many(count, n_flows)

    def drained(self, gid: int) -> simpy.Event:
        """Fires when group ``gid``'s last flow drains (:meth:`CompletionGroups.drained`)."""
        return self.groups.drained(gid)

    def start(
        self,
        src_gpu: Sequence[int] | np.ndarray,
        dst_gpu: Sequence[int] | np.ndarray,
        size_bytes: Sequence[float] | np.ndarray,
        group: int | np.ndarray,
        tag: int | np.ndarray = -1,
    ) -> np.ndarray:
        """Start flows now; returns their ids. A flow to itself or of 0 bytes is done at once."""
        src = np.asarray(src_gpu, dtype=np.int64)
        dst = np.asarray(dst_gpu, dtype=np.int64)
        size = np.asarray(size_bytes, dtype=np.float64)
        ids = self.flows.append(
            src=src,
            dst=dst,
            size_bytes=size,
            rem_bytes=size,
            group=group,  # a scalar or n values (the column assignment broadcasts)
            tag=tag,
            start_s=self.env.now,
        )
        local = (src == dst) | (size <= 0)
        if local.any():
            self._complete(ids[local], np.full(int(local.sum()), self.env.now))
        net = ids[~local]
        if net.size:
            self._route(net)
            pairs = self._alone_pairs(net)
            if pairs is not None:
                self._go_solo(net, *pairs)
                return ids
            self._materialize(net)
            self._pending.append(net)
            self._request_update()
        return ids

    def transfer(self, src_gpu: int, dst_gpu: int, size_bytes: float) -> simpy.Event:
        """One flow in its own group; the event fires when its last byte arrives."""
        gid, event = self.expect(1)
        self.start([src_gpu], [dst_gpu], [size_bytes], gid)
        return event

    # ----------------------------------------------------------- internals
    def _route(self, ids: np.ndarray) -> None:
        """Route the flows ``ids``. A start's (sources, destinations) recur (a rank's
        all-to-all, layer after layer): their routes, stored once in the pair store, are
        looked up by those arrays (routes depend on their pair only, as for ``start_one``)."""
        fl = self.flows.col
        src, dst = fl["src"][ids], fl["dst"][ids]
        key = (src.tobytes(), dst.tobytes())
        known = self._routed.get(key)
        if known is None:
            rs = self.router.routes(src, dst)
            base = self.pairs.append(rs.link, rs.weight)
            if len(self._routed) >= ROUTED_STARTS:
                self._routed.clear()
            known = self._routed[key] = (base + rs.ptr[:-1], np.diff(rs.ptr), rs.latency_s,
                                         rs.cap_Bps)
        fl["pair_ptr"][ids], fl["pair_len"][ids], fl["latency_s"][ids] = known[:3]
        fl["ideal_s"][ids] = known[2] + fl["size_bytes"][ids] / known[3]

    def _request_update(self) -> None:
        if self._flush_at != self.env.now:
            self._flush_at = self.env.now
            LateEvent(self.env, 0.0, self._on_event)

    def _on_event(self, event: simpy.events.Event) -> None:
        gen = int(event.value if event.value is not None else -1)
        if gen >= 0 and gen != self._gen:
            return  # a wake-up planned under rates that have since changed
        self._update(self.env.now)

    def _update(self, now: float) -> None:
        """Bring the flows to ``now`` (the current time, or a solo flow's start when it joins
        the active set late: :meth:`_materialize`), finish the due ones, join the pending
        ones, re-solve and plan the next wake-up."""
        act = self.active
        if now <= self._t_last and not self._pending and not self._due(now).any():
            return
        self._advance(now)
        finished = self._due(now)
        done = finished.nonzero()[0]
        if done.size:
            ids, plan_s = act.ids[done], act.plan_s[done]
            drain = np.where(np.isnan(plan_s), now, plan_s)
            self.flows.col["rem_bytes"][ids] = 0.0
            self.rates.leave(*act.routes(done), act.rate[done])
            act.keep(~finished)
            self._flows_on -= self._count(ids)
            self._complete(ids, drain)
            if self._observers:
                self._touched.append(ids)
        act.plan_s[:] = np.nan
        n_old = act.n
        self._join_pending(now)
        self._solve(now, n_old)
        self._plan(now)
        touched, self._touched = self._touched, []
        if self._observers and touched and not self._replaying:
            self._notify(np.concatenate(touched))

    def _due(self, now: float) -> np.ndarray:
        act = self.active
        return (act.plan_s <= now * (1 + batching.TIME_RTOL)) | (act.rem <= act.tol)

    def _advance(self, now: float) -> None:
        """Move every flow on at its rate up to ``now``; charge the links the bytes moved."""
        dt = now - self._t_last
        act = self.active
        if dt > 0 and act.n:
            full = act.rate * dt
            moved = self._load * dt
            over = (full > act.rem).nonzero()[0]  # drained before now (a finish batch)
            if over.size:
                links, wts, owner = self._pairs(act.ids[over])
                excess = (full[over] - act.rem[over])[owner] * wts
                moved -= np.bincount(links, weights=excess, minlength=self.fabric.n_links)
            act.rem = np.maximum(act.rem - full, 0.0)  # the table's rem_bytes: at join/finish
            self.stats.interval(self._t_last, dt, moved, self._load)
        self._t_last = now

    def _pairs(self, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(link, weight, position in ``ids``) of every hop of the flows ``ids``."""
        fl = self.flows.col
        if ids.size == 1:  # one flow (a ring chunk, a send): its hops are one slice
            ptr, n = int(fl["pair_ptr"][ids[0]]), int(fl["pair_len"][ids[0]])
            return (self.pairs.link[ptr:ptr + n], self.pairs.weight[ptr:ptr + n],
                    np.zeros(n, dtype=np.int64))
        lens = fl["pair_len"][ids]
        owner = np.repeat(np.arange(ids.size), lens)
        first = fl["pair_ptr"][ids] - np.cumsum(lens) + lens
        idx = np.arange(int(lens.sum())) + np.repeat(first, lens)
        return self.pairs.link[idx], self.pairs.weight[idx], owner

    def _count(self, ids: np.ndarray) -> np.ndarray:
        """Per link, how many of the flows ``ids`` cross it."""
        return np.bincount(self._pairs(ids)[0], minlength=self.fabric.n_links)

    def _join_pending(self, now: float) -> None:
        if not self._pending:
            return
        chunks, self._pending = self._pending, []
        new = chunks[0] if len(chunks) == 1 else np.concatenate(chunks)
        slinks, swts, link = self._joins.of(chunks, new)
        fl = self.flows.col
        self.active.append(new, fl["size_bytes"][new], fl["start_s"][new], slinks, swts,
                           rem=fl["rem_bytes"][new])
        self.rates.enter(slinks, swts)
        self._young[slinks] = now
        self._young[-1] = -np.inf
        self._flows_on += np.bincount(link, minlength=self.fabric.n_links)

    def _solve(self, now: float, n_old: int) -> None:
        act = self.active
        if act.n == 0:
            self._load = np.zeros(self.fabric.n_links)
        else:
            redo, alloc = self.rates.solve(act.links, act.wts, act.rate, n_old)
            self.solves += 1
            act.rate[redo] = alloc.rate_Bps
            ids = act.ids[redo]
            self.flows.col["rate_Bps"][ids] = alloc.rate_Bps
            self.flows.col["bottleneck"][ids] = alloc.bottleneck_link
            if self._observers:
                self._touched.append(ids)
            self._load = self.rates.load[self._load_of]
        if not self._replaying:  # a replay's samples were taken when its flows started
            self.stats.sample(now, self._sampled_load(), self._flows_on)

    def _plan(self, now: float) -> None:
        """Mark the next batch of drains and schedule the wake-up at its end."""
        self._gen += 1
        act = self.active
        if act.n == 0:
            return
        left_s = act.rem / act.rate
        cut = batching.batch_cut(now, left_s, act.start_s, act.links, self._young, self.eps)
        batch = (left_s <= cut).nonzero()[0]
        left_batch_s = left_s[batch]
        act.plan_s[batch] = now + left_batch_s
        wake_s = float(left_batch_s.max())
        if now != self.env.now:  # a late join (_materialize): wake at now + wake_s
            wake_s = max(now + wake_s - self.env.now, 0.0)
        LateEvent(self.env, wake_s, self._on_event, self._gen)

    def _complete(self, ids: np.ndarray, drain_s: np.ndarray) -> None:
        fl = self.flows.col
        if ids.size == 1:  # one flow (a ring chunk, a send): scalars, the same float sums
            self._complete_one(int(ids[0]), float(drain_s[0]))
            return
        fl["drain_s"][ids] = drain_s
        finish = drain_s + fl["latency_s"][ids]
        fl["finish_s"][ids] = finish
        self.groups.arrive(ids, fl["group"][ids], finish)

    def _complete_one(self, fid: int, drain_s: float) -> None:
        """:meth:`_complete` of one flow, in scalars."""
        fl = self.flows.col
        fl["drain_s"][fid] = drain_s
        finish = drain_s + float(fl["latency_s"][fid])
        fl["finish_s"][fid] = finish
        self.groups.arrive_one(fid, int(fl["group"][fid]), finish)
