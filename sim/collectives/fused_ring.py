"""A ring reduce-scatter or all-gather timed in closed form, for rings alone on their links.

:class:`moesim.collectives.ring.RingCollective` sends every chunk as a flow. When each ring
edge's links carry nothing else while the ring runs (a TP group inside one NVLink domain, in
fast mode: :mod:`moesim.step.fast`), every chunk drains at its edge's idle rate (max-min gives
a flow alone its least ``cap / weight``: :mod:`moesim.engine.solo`), so the engine's schedule
is a recursion over (rank, step) that needs no events. With ``T_r`` the chunk's time on edge
``r -> r+1`` at that rate, ``L_r`` its path latency and ``start_r`` when rank ``r`` reached the
collective, as the engine's rings do (reduction time 0):

* rank ``r`` sends step 0 at ``start_r``, step ``s`` when its step ``s - 1`` chunk has drained
  and it has received step ``s - 1``: ``send[r, s] = max(drain[r, s-1], recv[r, s-1])``;
* ``drain[r, s] = send[r, s] + T_r``; its successor receives it ``L_r`` later;
* rank ``r`` is done when it has received all ``n - 1`` steps.

Every rank's end depends on every rank's start (each chunk passes every rank), so the times
are computed when the last rank arrives, and the ranks' events are scheduled then. Exact
against the flow path while the ring's edges are disjoint and carry no other traffic
(tested, ``tests/test_collectives_fused.py``); the caller vouches for that.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import simpy

from moesim.collectives.base import RankStarted
from moesim.engine.routing import Router


class FusedRing(RankStarted):
    """A ring of ``n_steps`` steps over ``gpus`` (ring order) timed in closed form; ``edges``:
    :func:`ring_edges` of ``gpus`` (callers that run one ring many times keep it)."""

    def __init__(self, env: simpy.Environment, edges: tuple[np.ndarray, np.ndarray],
                 gpus: Sequence[int] | np.ndarray, size_bytes: float) -> None:
        self.env = env
        self.gpus = np.asarray(gpus, dtype=np.int64)
        n = self.gpus.size
        self.n_steps = n - 1
        self.chunk_bytes = float(size_bytes) / n
        self.done: simpy.Event = env.event()
        self.rank_done: list[simpy.Event] = [env.event() for _ in range(n)]
        self._init_ranks(n)
        self._start_s = np.zeros(n)
        self._edges = edges

    def _on_start(self, rank: int) -> None:
        self._start_s[rank] = self.env.now
        if self._started.all():
            self._finish()

    def _finish(self) -> None:
        n, now = self.gpus.size, self.env.now
        if n == 1 or self.chunk_bytes <= 0:
            ends = self._start_s.copy()
        else:
            cap_Bps, latency_s = self._edges
            ends = ring_ends_s(self._start_s, self.chunk_bytes / cap_Bps, latency_s)
        for rank, end_s in enumerate(ends.tolist()):
            self._fire(self.rank_done[rank], max(end_s, now), end_s)
        self._fire(self.done, max(float(ends.max()), now), float(ends.max()))

    def _fire(self, event: simpy.Event, at_s: float, value: float) -> None:
        def fire(_: simpy.Event) -> None:
            event.succeed(value)

        self.env.timeout(at_s - self.env.now).callbacks.append(fire)


def ring_edges(router: Router, gpus: Sequence[int] | np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(idle rate, path latency) of each ring edge ``gpus[r] -> gpus[r + 1]``."""
    ring = np.asarray(gpus, dtype=np.int64)
    if ring.size < 2:
        return np.zeros(ring.size), np.zeros(ring.size)
    rs = router.routes(ring, np.roll(ring, -1))
    return rs.cap_Bps, rs.latency_s


def ring_ends_s(start_s: np.ndarray, chunk_s: np.ndarray, latency_s: np.ndarray) -> np.ndarray:
    """When each rank of a ring has received all ``n - 1`` steps (module docstring's recursion;
    ``chunk_s[r]``, ``latency_s[r]``: edge ``r -> r + 1``). Vectorised over ranks, a loop over
    the ``n - 1`` steps."""
    return ring_schedule_s(start_s, chunk_s, latency_s)[0]


def ring_schedule_s(start_s: np.ndarray, chunk_s: np.ndarray, latency_s: np.ndarray,
                    pred: np.ndarray | None = None, n: int | None = None,
                    first_send_s: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(:func:`ring_ends_s`, when each edge ``r -> r + 1`` drains its last chunk): edge ``r``
    carries the ring's chunks from ``start_s[r]`` to that drain, one at a time. ``pred`` and
    ``n``: several disjoint rings of ``n`` ranks at once (``pred[r]``: the rank that sends
    to ``r``); default one ring in array order. ``first_send_s``: when each rank sends its
    first chunk, if later than its start (its link still busy)."""
    if pred is None:
        n = start_s.size
        pred = np.roll(np.arange(n), 1)
    assert n is not None
    send = (start_s if first_send_s is None else first_send_s).copy()  # step 0
    recv = np.zeros(n)
    drain = send.copy()
    for _ in range(n - 1):  # step s = 0 .. n - 2
        drain = send + chunk_s
        recv = (drain + latency_s)[pred]  # rank r receives step s from rank r - 1
        send = np.maximum(drain, recv)  # step + 1: own chunk drained, step received
    return np.maximum(recv, start_s), drain
