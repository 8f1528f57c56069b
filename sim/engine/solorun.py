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

import numpy as np
import simpy

from moesim.engine.active import ActiveFlows
from moesim.engine.fabric import Fabric
from moesim.engine.flowtable import Columns
from moesim.engine.late import LateEvent
from moesim.engine.linkstats import LinkStats
from moesim.engine.solo import SoloSet, alone, moved_bytes


class SoloFlows:
    """The solo-flow half of :class:`moesim.engine.network.FlowNetwork` (module docstring)."""

    env: simpy.Environment
    fabric: Fabric
    flows: Columns
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

    def _pairs(self, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        raise NotImplementedError

    def _update(self, now: float) -> None:
        raise NotImplementedError

    def _complete(self, ids: np.ndarray, drain_s: np.ndarray) -> None:
        raise NotImplementedError

    def _notify(self, ids: np.ndarray) -> None:
        raise NotImplementedError

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
            solo = alone(fid, now, float(fl["size_bytes"][fid]), hops[mine], wts[mine],
                         self.active.solve_map, self._load_of, self.fabric.cap_Bps)
            self._solos.add(solo)
            fl["rate_Bps"][fid], fl["bottleneck"][fid] = solo.rate_Bps, solo.bottleneck
            self._young[solo.solver_links] = now
            self._flows_on[solo.hops] += 1
            LateEvent(self.env, solo.size_bytes / solo.rate_Bps, self._solo_done, fid)
        self._sample(now, hops)

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
        self._complete(np.array([fid]), np.array([solo.drain_s]))
        self._sample(now, solo.hops)
        if idle:
            self._gen += 1
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
