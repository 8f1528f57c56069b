"""One gradient-ring job of fast mode's phases (:mod:`moesim.step.phases`): every ring of a
stage as one flow per ring edge, with each rank's own completion time.

The engine's rings (:mod:`moesim.collectives.ring`, NCCL's ring algorithm) move a buffer of
``size`` bytes in ``n - 1`` steps of one chunk ``c = size / n`` over every edge ``e`` (rank
``e`` to ``e + 1``); edge ``e`` sends its chunk ``s`` once rank ``e`` holds chunk ``s - 1``
from edge ``e - 1``, so chunk ``s`` of edge ``e`` carries what ranks ``e - s .. e`` put in.
Rank ``i`` is done when its last chunk arrives, which needs every edge ``i - 1 - d``
(``d = 0 .. n - 2``) to have delivered ``n - 1 - d`` chunks and the ``d`` hops after it to have
passed the last of them on:

    D_i = max_d [ C_{i-1-d}(n - 1 - d) + L_{i-1-d} + sum_{k < d} h_{i-1-k} ]

with ``C_u(m)`` the time edge ``u`` has drained ``m`` chunks, ``L_u`` its path latency and
``h_e = c / cap_e + L_e`` one chunk's hop at edge ``e``'s path capacity. So behind a slow edge
the ranks finish one after another, the one right after it last (``D`` falls by one slow-edge
chunk per rank downstream), as in full mode; what those ranks do next (their optimizer step,
their all-gathers: :class:`moesim.step.phased.PhasedState`) overlaps the slow edge's tail.

Each edge is one flow of the chunks it may send (max-min shared with every other flow of the
network; its rate constant between the network's updates, :attr:`FlowNetwork.observers`), so
``C_u(m)`` is exact for that flow. What the fluid edge leaves out is the chunk coupling of a
fast edge to the slow one upstream: it runs ahead at its own rate and idles after, where the
engine's edge trails the slow edge chunk by chunk (same bytes on its links, spread over the
job). Edge ``e`` may send chunk ``s`` once ranks ``e - s .. e`` have all joined (a
reduce-scatter's ranks join together in the phases, an all-gather's one by one). Uncongested
equal edges of rate ``B``: ``D_i = (n - 1)(c / B + L)``, the engine's ring exactly
(``tests/test_step_ringjob.py`` compares the two, congested rings included).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import simpy

from moesim.engine.late import LateEvent
from moesim.engine.network import FlowNetwork

RTOL = 1e-9
"""Relative tolerance on byte counts and times (float round-off of the fluid progress)."""

RanksDone = Callable[[np.ndarray, np.ndarray], None]
"""Called with the GPUs that just finished and their finish times (s)."""


class RingJob:
    """Rings of GPUs ``gpus`` ([ring, position]) moving ``size_bytes`` per rank (module
    docstring). ``ids``: the flow endpoints, either [ring, position] (each ring its own flows)
    or [1, position] (one flow per position standing for every ring's,
    :class:`moesim.engine.copies.CopiesRouter`: the rings are copies of one ring; a position
    joins once all its copies have). ``done`` fires when every rank has finished (value: then).
    """

    def __init__(self, net: FlowNetwork, ids: np.ndarray, gpus: np.ndarray, size_bytes: float,
                 ) -> None:
        self.net, self.env = net, net.env
        self.gpus = np.asarray(gpus, dtype=np.int64)
        n = self.gpus.shape[1]
        ids = np.asarray(ids, dtype=np.int64).reshape(-1, n)
        self.copies = ids.shape[0] == 1
        self.n, self.chunk = n, float(size_bytes) / n
        self.src = ids.ravel()
        self.dst = np.roll(ids, -1, axis=1).ravel()
        self.joined = np.zeros(self.gpus.shape, dtype=bool)
        edges = ids.size
        self.sent = np.zeros(edges, dtype=np.int64)  # chunks handed to flows
        self.flow = np.full(edges, -1, dtype=np.int64)  # the flow in flight
        self.base = np.zeros(edges)  # bytes of the edge's drained flows
        self.deliv = np.zeros(edges)  # bytes drained as of t_ref
        self.rate = np.zeros(edges)  # rate since t_ref
        self.t_ref = self.env.now
        self.cross = np.full((edges, n), np.nan)  # [edge, m]: m chunks drained
        self.done_s = np.full(ids.shape, np.nan)  # per [flow ring, position]
        self.listeners: list[RanksDone] = []
        self.done: simpy.Event = self.env.event()
        self._gen = 0
        if n < 2 or size_bytes <= 0:
            self.done_s[:] = self.env.now
            self.done.succeed(self.env.now)
            return
        rs = net.router.routes(self.src, self.dst)
        self.latency_s = rs.latency_s
        hop = self.chunk / rs.cap_Bps + rs.latency_s
        # row[q, i, d]: the edge d hops upstream of rank i's incoming edge; m[d]: its chunks
        up = (np.arange(n)[:, None] - 1 - np.arange(n - 1)[None, :]) % n
        self.row = (np.arange(ids.shape[0]) * n)[:, None, None] + up[None]
        self.m = n - 1 - np.arange(n - 1)
        path = hop[self.row]  # [q, i, d]: hop of edge i-1-d
        self.hops_s = np.cumsum(path, axis=2) - path  # sum over k < d of h_{i-1-k}
        self._lat_hops = self.latency_s[self.row] + self.hops_s
        # _availability: rank e - k (k = 0 .. n-2) and the k hops from it to rank e
        self._up_rank = (np.arange(n)[:, None] - np.arange(n - 1)[None, :]) % n
        back = hop.reshape(-1, n)[:, (self._up_rank - 1) % n]  # hop of edge e - 1 - k ...
        self._fill_s = np.cumsum(back, axis=2) - back  # ... summed over edges e-k .. e-1
        self._hop_s = hop  # one chunk at the edge's path capacity, and its latency
        self.t_join = np.full(ids.shape, np.inf)
        self._avail = np.full((edges, n - 1), np.inf)
        self._key = net.observe(self._notified)
        self._due_at = -1.0  # the instant a notified refresh is planned for
        self._wake_at = np.inf  # the planned wake (_plan)
        self._fed, self._sent_at = 0, -1  # feeds so far; the feed _in_flows was made after
        self._in_flows = np.zeros(ids.shape, dtype=bool)

    def gpu_done_s(self) -> np.ndarray:
        """Per GPU of ``gpus`` ([ring, position]), its finish time (nan: not yet)."""
        return np.broadcast_to(self.done_s, self.gpus.shape) if self.copies else self.done_s

    def join(self, mask: np.ndarray) -> None:
        """The ranks ``mask`` ([ring, position]) join now: their edges get the chunks that
        every rank they carry has put in, and start on them."""
        if self.done.triggered:
            return
        self._advance()
        self.joined |= mask
        here = self.joined.all(axis=0, keepdims=True) if self.copies else self.joined
        self.t_join[here & np.isinf(self.t_join)] = self.env.now
        self._avail = self._availability()
        self._feed()
        self._refresh(force=True)

    def _availability(self) -> np.ndarray:
        """[edge, s]: when edge ``e`` may send its chunk ``s`` (module docstring): once
        ranks ``e - s .. e`` have joined; the shard of a rank ``e - k`` that joined after
        rank ``e`` reaches it ``k`` uncongested hops after that rank joined, the others are
        there when rank ``e`` joins (a ring that starts together is front-loaded)."""
        t = self.t_join  # [flow ring, position]
        late = t[:, self._up_rank]  # [q, e, k]: join of rank e - k
        own = t[:, :, None]
        delay = np.where(late > own, late + self._fill_s, -np.inf)
        delay[np.isinf(late)] = np.inf
        avail = np.maximum(own, np.maximum.accumulate(delay, axis=2))
        return avail.reshape(-1, self.n - 1)

    def allowed(self, edges: np.ndarray) -> np.ndarray:
        """Per edge, the chunks to hand it now: those available now (:meth:`_availability`)
        and each later one available before the edge could have sent the ones before it, one
        hop each (a chunk at the path's capacity plus its latency), as one flow. Such a flow
        runs ahead of what it may send by at most its path latency per chunk (the chunks of
        a ring edge leave back to back, without the latency between them)."""
        now = self.env.now
        ahead = np.arange(self.n - 1)[None, :] - self.sent[edges, None]  # chunks before s
        reach = now + np.maximum(ahead, 0) * self._hop_s[edges, None]
        ok = self._avail[edges] <= reach * (1 + RTOL) + 1e-15
        return np.cumprod(ok, axis=1).sum(axis=1)

    def _feed(self) -> bool:
        """Start a flow on every idle edge with chunks allowed and not yet sent (True if
        any)."""
        idle = np.flatnonzero((self.flow < 0) & (self.sent < self.n - 1))
        idle = idle[self._avail[idle, self.sent[idle]] <= self.env.now * (1 + RTOL) + 1e-15]
        if not idle.size:
            return False
        more = self.allowed(idle) - self.sent[idle]
        go = idle[more > 0]
        more = more[more > 0]
        if not go.size:
            return False
        gid, _ = self.net.expect(go.size)
        self.flow[go] = self.net.start(self.src[go], self.dst[go], more * self.chunk, gid)
        self.net.watch(self.flow[go], self._key)
        self.sent[go] += more
        self._fed += 1
        self.net.kick()
        # a flow that runs alone has its rate now; the solved ones get theirs at the update
        self.rate[go] = self.net.flows.col["rate_Bps"][self.flow[go]]
        return True

    def _advance(self) -> tuple[bool, np.ndarray]:
        """Bring the drained bytes to now, stamping the chunk boundaries crossed since
        ``t_ref`` (rates constant in between); free edges whose flow drained. (Whether a
        flow still in flight changed rate, the edges whose flow drained.)"""
        now = self.env.now
        live = np.flatnonzero(self.flow >= 0)
        deliv, rate = self.deliv.copy(), np.zeros_like(self.rate)
        drained = np.zeros(0, dtype=np.int64)
        if live.size:
            rem, r = self.net.progress(self.flow[live])
            size = self.net.flows.col["size_bytes"][self.flow[live]]
            deliv[live] = self.base[live] + size - rem
            rate[live] = r
            gone = ~np.isnan(self.net.flows.col["drain_s"][self.flow[live]])
            drained = live[gone]
            deliv[drained] = self.sent[drained] * self.chunk
        grew = np.flatnonzero(deliv > self.deliv * (1 + RTOL))
        if grew.size:
            self._stamp(grew, deliv[grew], now)
        going = np.ones(rate.size, dtype=bool)
        going[drained] = False
        changed = not np.array_equal(rate[going], self.rate[going])
        self.deliv, self.rate, self.t_ref = deliv, rate, now
        if drained.size:
            self.base[drained] = self.sent[drained] * self.chunk
            self.flow[drained] = -1
            self.rate[drained] = 0.0
        return changed, drained

    def _stamp(self, edges: np.ndarray, new: np.ndarray, now: float) -> None:
        """Stamp the chunk boundaries ``edges`` crossed since ``t_ref`` (bytes then
        ``deliv``, now ``new``) at the times their rates since then give."""
        c, old, r = self.chunk, self.deliv[edges], self.rate[edges]
        lo = np.floor(old / c * (1 + RTOL) + RTOL).astype(np.int64) + 1
        hi = np.minimum(np.floor(new / c * (1 + RTOL) + RTOL).astype(np.int64), self.n - 1)
        count = np.maximum(hi - lo + 1, 0)
        if not count.any():
            return
        owner = np.repeat(np.arange(edges.size), count)
        m = np.arange(int(count.sum())) - np.repeat(np.cumsum(count) - count, count)
        m += lo[owner]
        rate = r[owner]
        with np.errstate(divide="ignore", invalid="ignore"):
            t = np.where(rate > 0, self.t_ref + (m * c - old[owner]) / rate, now)
        self.cross[edges[owner], m] = np.minimum(t, now)

    def _projected(self) -> np.ndarray:
        """Per rank not yet done, its finish time under the current rates; inf where a chunk
        it needs is not yet in a flow (only the ranks whose chunks all are get computed), or
        its flow is not yet solved."""
        due = np.full(self.done_s.shape, np.inf)
        if self._sent_at != self._fed:  # [q, i]: rank i's chunks all in flows (sent grows)
            self._in_flows = (self.sent[self.row] >= self.m).all(axis=-1)
            self._sent_at = self._fed
        ok = self._in_flows & np.isnan(self.done_s)
        if not ok.any():
            return due
        rows = self.row[ok]  # [rank, d]: the edges each needs
        need = self.cross.ravel()[rows * self.n + self.m]  # their chunk drains (nan: ahead)
        ahead = np.isnan(need)
        if ahead.any():
            edge = rows[ahead]
            rate, now = self.rate[edge], self.env.now
            left = np.broadcast_to(self.m * self.chunk, rows.shape)[ahead] - self.deliv[edge]
            with np.errstate(divide="ignore", invalid="ignore"):
                eta = np.where(rate > 0, now + np.maximum(left, 0.0) / rate, np.inf)
            need[ahead] = eta
        due[ok] = (need + self._lat_hops[ok]).max(axis=-1)
        return due

    def _refresh(self, force: bool = False) -> None:
        """Observer of the network: stamp, feed, fire the ranks that are done, plan a wake."""
        if self.done.triggered:
            return
        changed, drained = self._advance()
        fed = self._feed() if (drained.size or force) else False
        now = self.env.now
        if not (changed or fed or force):  # flows drained as projected: the due times stand
            if drained.size:
                idle = drained[self.sent[drained] < self.n - 1]
                nxt = float(self._avail[idle, self.sent[idle]].min()) if idle.size else np.inf
                if nxt < self._wake_at:
                    self._plan(nxt)
            return
        due = self._projected()
        fresh = np.isnan(self.done_s) & (due <= now * (1 + RTOL) + 1e-15)
        if fresh.any():
            self.done_s[fresh] = np.minimum(due[fresh], now)
            if self.copies:
                gpus = self.gpus[:, fresh[0]]
                times = np.broadcast_to(self.done_s[fresh], gpus.shape)
            else:
                gpus, times = self.gpus[fresh], self.done_s[fresh]
            for listener in self.listeners:
                listener(gpus.ravel(), times.ravel())
        if not np.isnan(self.done_s).any():
            self.net.unobserve(self._key)
            self.done.succeed(float(self.done_s.max()))
            return
        left = due[np.isnan(self.done_s)]
        wake = float(left.min())
        idle = np.flatnonzero((self.flow < 0) & (self.sent < self.n - 1))
        if idle.size:
            wake = min(wake, float(self._avail[idle, self.sent[idle]].min()))
        self._plan(wake)

    def _plan(self, wake: float) -> None:
        """Wake at ``wake`` (only: an earlier planned wake is dropped)."""
        self._gen += 1
        self._wake_at = wake
        if np.isfinite(wake):
            LateEvent(self.env, max(wake - self.env.now, 0.0), self._wake, self._gen)

    def _wake(self, event: simpy.events.Event) -> None:
        if event.value == self._gen:
            self._refresh(force=True)

    def _notified(self) -> None:
        """The network re-rated or finished flows of this job: refresh once this instant,
        after its other updates (rates are constant until the next notification)."""
        if self._due_at != self.env.now:
            self._due_at = self.env.now
            LateEvent(self.env, 0.0, self._on_notified)

    def _on_notified(self, _: simpy.events.Event) -> None:
        self._due_at = -1.0
        self._refresh()


class StageTail:
    """The DP tails of the ranks ``first .. first + count - 1`` of a stage, begun now: each
    joins the all-gathers ``gathers`` ``opt_s`` after the later of now and its own finish in
    every reduce-scatter of ``scatters`` (:meth:`moesim.step.phased.PhasedState.begin_tail`)."""

    def __init__(self, env: simpy.Environment, first: int, count: int,
                 scatters: list[RingJob], gathers: list[RingJob], opt_s: float) -> None:
        self.env, self.first, self.opt_s, self.gathers = env, first, opt_s, gathers
        self.left = np.zeros(count, dtype=np.int64)  # reduce-scatters not yet done per rank
        self.ready_s = np.full(count, env.now)
        for job in scatters:
            local, done_s = job.gpus - first, job.gpu_done_s()
            finished = ~np.isnan(done_s)
            np.maximum.at(self.ready_s, local[finished], done_s[finished])
            np.add.at(self.left, local[~finished], 1)
            if not finished.all():
                job.listeners.append(self._done)
        self._release(np.flatnonzero(self.left == 0))

    def _done(self, gpus: np.ndarray, times_s: np.ndarray) -> None:
        local = gpus - self.first
        np.maximum.at(self.ready_s, local, times_s)
        np.subtract.at(self.left, local, 1)
        self._release(np.unique(local[self.left[local] == 0]))

    def _release(self, local: np.ndarray) -> None:
        """The ranks ``local`` join the all-gathers after their optimizer step."""
        if not local.size or not self.gathers:
            return
        at = self.ready_s[local] + self.opt_s
        for t in np.unique(at):
            ranks = self.first + local[at == t]
            event = self.env.timeout(max(float(t) - self.env.now, 0.0))
            event.callbacks.append(self._joiner(ranks))

    def _joiner(self, ranks: np.ndarray) -> Callable[[simpy.Event], None]:
        def go(_: simpy.Event) -> None:
            for job in self.gathers:
                job.join(np.isin(job.gpus, ranks))

        return go
