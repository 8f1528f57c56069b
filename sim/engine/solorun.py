"""How :class:`moesim.engine.network.FlowNetwork` runs flows alone on their links
(:mod:`moesim.engine.solo`): which new flows may, their wake-ups, and how they join the solved
flows when a flow comes to share one of their links.

A new flow runs alone when no flow is due to join at its instant and its links are disjoint
from each other's and from every flow's on the wire, solved or solo. Max-min rates on
disjoint link sets are independent, so its closed-form rate is the solver's however many
solved flows run elsewhere (a ring step's chunk on NVLink beside all-to-alls on the spines).
With no solved flow active, solo flows that must join do so as of their own starts (a replay
of the updates the solver path would have made); beside solved flows, the ones that share a
link with the newcomer join now with the bytes they have left (their rate has been constant
since they started: nothing else crossed their links), and the others stay alone. With
``batch_window_rel = 0`` both paths give the solver path's times to float round-off
(``tests/test_engine_solo.py``); with eps > 0 a solo flow is not part of anyone's finish
batch, so it drains at its own time, as eps = 0 would.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import simpy

from moesim.engine.active import ActiveFlows
from moesim.engine.fabric import Fabric
from moesim.engine.flowtable import Columns, PairStore
from moesim.engine.late import LateEvent
from moesim.engine.linkstats import LinkStats
from moesim.engine.routing import Router
from moesim.engine.solo import LoneRoute, Solo, SoloSet, alone, moved_bytes


class SoloFlows:
    """The solo-flow half of :class:`moesim.engine.network.FlowNetwork` (module docstring)."""

    env: simpy.Environment
    router: Router
    fabric: Fabric
    flows: Columns
    pairs: PairStore
    stats: LinkStats
    active: ActiveFlows
    _solos: SoloSet
    _pending: list[np.ndarray]
    _flush_at: float | None
    _flows_on: np.ndarray
    _load: np.ndarray
    _load_of: np.ndarray
    _young: np.ndarray
    _t_last: float
    _gen: int
    _replaying: bool
    _observers: dict[int, Callable[[], None]]
    _lone: dict[tuple[int, int], LoneRoute] | None = None  # start_one's routes, by pair
    # LoneRoutes (by ptr) whose lone load and single flow the peaks hold already: alone, a flow
    # of the pair puts the same load on the same links again, so sampling it raises nothing
    _peaked: set[int]

    def start(self, src_gpu: np.ndarray, dst_gpu: np.ndarray, size_bytes: np.ndarray,
              group: int | np.ndarray, tag: int | np.ndarray = -1) -> np.ndarray:
        raise NotImplementedError

    def _request_update(self) -> None:
        raise NotImplementedError

    def _pairs(self, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        raise NotImplementedError

    def _update(self, now: float) -> None:
        raise NotImplementedError

    def _complete(self, ids: np.ndarray, drain_s: np.ndarray) -> None:
        raise NotImplementedError

    def _complete_one(self, fid: int, drain_s: float) -> None:
        raise NotImplementedError

    def _notify(self, ids: np.ndarray) -> None:
        raise NotImplementedError

    def start_one(self, src_gpu: int, dst_gpu: int, size_bytes: float, group: int,
                  tag: int = -1) -> int:
        """:meth:`start` of one flow (a point-to-point send); returns its id. The same flow,
        route, rate and events as :meth:`start` gives it, with the route and the rate it gets
        alone looked up per (source, destination) pair (:class:`LoneRoute`) instead of
        computed per flow."""
        if src_gpu == dst_gpu or not size_bytes > 0:
            return int(self.start(np.array([src_gpu]), np.array([dst_gpu]),
                                  np.array([size_bytes], dtype=np.float64), group, tag)[0])
        now, route = self.env.now, self._lone_route(src_gpu, dst_gpu)
        fid = self.flows.append_row(src=src_gpu, dst=dst_gpu, size_bytes=size_bytes,
                                    rem_bytes=size_bytes, group=group, tag=tag, start_s=now)
        fl = self.flows.col
        fl["pair_ptr"][fid], fl["pair_len"][fid] = route.ptr, route.hops.size
        fl["latency_s"][fid] = route.latency_s
        fl["ideal_s"][fid] = route.latency_s + size_bytes / route.cap_Bps
        if route.alone is not None and self._may_run_alone(route.hops):
            self._run_alone(route.solo(fid, now, size_bytes))
            if route.ptr not in self._peaked:
                self._sample(now, route.hops)
                if not self.stats.record_timeline:
                    self._peaked.add(route.ptr)
        else:
            net = np.array([fid], dtype=np.int64)
            self._materialize(net)
            self._pending.append(net)
            self._request_update()
        return fid

    def _lone_route(self, src_gpu: int, dst_gpu: int) -> LoneRoute:
        """The :class:`LoneRoute` of (``src_gpu``, ``dst_gpu``), made on first use: the route
        stored once in the pair store (flows read their hops by pointer, never write them)."""
        if self._lone is None:
            self._lone, self._peaked = {}, set()
        route = self._lone.get((src_gpu, dst_gpu))
        if route is None:
            rs = self.router.routes(np.array([src_gpu]), np.array([dst_gpu]))
            hops, wts = rs.link.copy(), rs.weight.copy()
            solo = None
            if len(set(hops.tolist())) == hops.size:  # distinct hops (np.unique imports numpy.ma)
                solo = alone(-1, 0.0, 0.0, hops, wts, self.active.solve_map, self._load_of,
                             self.fabric.cap_Bps)
            route = self._lone[(src_gpu, dst_gpu)] = LoneRoute(
                ptr=self.pairs.append(hops, wts), hops=hops, weights=wts,
                latency_s=float(rs.latency_s[0]), cap_Bps=float(rs.cap_Bps[0]), alone=solo)
        return route

    def _may_run_alone(self, hops: np.ndarray) -> bool:
        """:meth:`_alone_pairs` for one new flow on ``hops`` (distinct links)."""
        if self._pending or (not self.active.n and self._flush_at == self.env.now):
            return False
        if self.active.n and (self._flows_on[hops] > 0).any():
            return False
        return not self._solos.on[hops].any()

    def _alone_pairs(self, net: np.ndarray
                     ) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
        """The hops of the new flows ``net`` (:meth:`_pairs`) if they can run alone: no flow
        due to join at this instant, their links disjoint from each other and from every
        flow's on the wire (solved or solo); else None. Max-min rates of flows on disjoint
        links are independent, so a flow alone on its links gets its closed-form rate however
        many solved flows run elsewhere."""
        if self._pending or (not self.active.n and self._flush_at == self.env.now):
            return None
        pairs = self._pairs(net)
        if self.active.n and (self._flows_on[pairs[0]] > 0).any():
            return None
        return pairs if self._solos.disjoint(pairs[0]) else None

    def _sampled_load(self) -> np.ndarray:
        """Per link, the load of the solved flows and the solo flows now."""
        if not self._solos.flows:
            return self._load
        if not self.active.n:
            return self._solos.load_Bps.copy()
        return self._load + self._solos.load_Bps

    def _sample(self, now: float, links: np.ndarray) -> None:
        """Link samples after solo flows on ``links`` (distinct) started or ended: only
        those links' loads changed, so only their peaks can (every link's load when a
        timeline is kept)."""
        if not self.stats.sample_on(now, links, self._solos.load_Bps[links],
                                    self._flows_on[links]):
            self.stats.sample(now, self._sampled_load(), self._flows_on)

    def _go_solo(self, net: np.ndarray, hops: np.ndarray, wts: np.ndarray,
                 owner: np.ndarray) -> None:
        """Run the flows ``net`` (hops ``hops`` of weights ``wts``, ``owner`` their position in
        ``net``) alone: the rates and counters a solve would give them, one wake-up each."""
        now, fl = self.env.now, self.flows.col
        ends = np.cumsum(np.bincount(owner, minlength=net.size))
        for i, fid in enumerate(net.tolist()):
            mine = slice(ends[i - 1] if i else 0, ends[i])
            self._run_alone(alone(fid, now, float(fl["size_bytes"][fid]), hops[mine], wts[mine],
                                  self.active.solve_map, self._load_of, self.fabric.cap_Bps))
        self._sample(now, hops)

    def _run_alone(self, solo: Solo) -> None:
        """Flow ``solo.fid`` runs alone from now: its rate, its links' counters, its wake-up."""
        fl, fid = self.flows.col, solo.fid
        self._solos.add(solo)
        fl["rate_Bps"][fid], fl["bottleneck"][fid] = solo.rate_Bps, solo.bottleneck
        self._young[solo.solver_links] = self.env.now
        self._flows_on[solo.hops] += 1
        LateEvent(self.env, solo.size_bytes / solo.rate_Bps, self._solo_done, fid)

    def _solo_done(self, event: simpy.events.Event) -> None:
        fid = event.value
        if fid not in self._solos.flows:
            return  # it joined the active set (_materialize)
        solo = self._solos.remove(fid)
        now = self.env.now
        dt = now - solo.t0_s
        if dt > 0:
            self.stats.interval_on(solo.hops, solo.t0_s, dt, moved_bytes(solo, dt),
                                   solo.load_Bps)
        idle = not self.active.n  # else the solved flows keep their clock and wake-up
        if idle:
            self._t_last = now
        self.flows.col["rem_bytes"][fid] = 0.0
        self._flows_on[solo.hops] -= 1
        self._complete_one(solo.fid, solo.drain_s)
        if self.stats.record_timeline:  # else no peak can rise: its links lost load and a flow
            self.stats.sample(now, self._sampled_load(), self._flows_on)
        if idle:
            self._gen += 1
        if self._observers:
            self._notify(np.array([fid]))

    def _materialize(self, net: np.ndarray) -> None:
        """Solo flows join the active set before the flows ``net`` do. With no solved flow
        active: all of them, as of their starts, as if they had joined then (one update per
        start instant before now, without new samples: the solo path took them); those of
        this instant join with the flows starting now. Beside solved flows: those that share
        a link with ``net``, now, with the bytes they have left (their rate was constant
        since they started: nothing else crossed their links); the others stay alone."""
        if self.active.n:
            self._join_solos_now(self._solos.sharing(self._pairs(net)[0]))
            return
        solos = self._solos.clear()
        if not solos:
            return
        for solo in solos:
            self._flows_on[solo.hops] -= 1
        self._replaying = True
        try:
            for t0 in sorted({solo.t0_s for solo in solos}):
                self._pending.append(np.array([s.fid for s in solos if s.t0_s == t0]))
                if t0 < self.env.now:
                    self._update(t0)
        finally:
            self._replaying = False

    def _join_solos_now(self, fids: list[int]) -> None:
        """The solo flows ``fids`` join the solved set now, part-drained (:meth:`_materialize`)."""
        now, fl = self.env.now, self.flows.col
        for fid in fids:
            solo = self._solos.remove(fid)
            dt = now - solo.t0_s
            if dt > 0:
                self.stats.interval_on(solo.hops, solo.t0_s, dt, moved_bytes(solo, dt),
                                       solo.load_Bps)
            fl["rem_bytes"][fid] = max(solo.size_bytes - solo.rate_Bps * dt, 0.0)
            self._flows_on[solo.hops] -= 1
        if fids:
            self._pending.append(np.array(fids, dtype=np.int64))
