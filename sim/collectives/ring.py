"""Ring reduce-scatter, all-gather and all-reduce as flows on a :class:`FlowNetwork`.

Rank i lives on GPU ``gpus[i]``; its ring successor is rank (i + 1) % n. Every
step moves one chunk of ``size_bytes / n`` bytes from each rank to its successor
(NCCL's ring algorithm; Patarasuk & Yuan 2009, "Bandwidth optimal all-reduce
algorithms for clusters of workstations"):

* reduce-scatter: n - 1 steps; each received chunk is reduced into the local one
  (optional reduction time per step) before it is sent on;
* all-gather: n - 1 steps of plain copies;
* all-reduce: reduce-scatter then all-gather, 2(n - 1) steps.

There is no global barrier: a rank sends its step s + 1 chunk as soon as its own
step s chunk has arrived (and been reduced) and its own step s chunk has drained,
and its first chunk when it reaches the collective (:meth:`RingCollective.start_rank`).
Arrivals before the receiving rank has started are accepted (the receive buffer is
assumed posted). A rank's sends go in step order, one on the wire at a time: NCCL moves
a ring channel's steps through a FIFO of buffer slots, so a rank that fell behind drains
its backlog chunk by chunk (its successor can go on with each chunk as it lands) rather
than as concurrent flows that share its link and all land late. The next chunk starts
when the previous one has drained from the links (:meth:`FlowNetwork.drained`), so the
path latency of a backlog is paid once, not per chunk. On an
uncongested ring with link bandwidth B and per-hop path latency L, each phase of
n - 1 steps takes (n - 1) * (size / n / B + L).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import simpy

from moesim.collectives.base import RankStarted
from moesim.engine.network import FlowNetwork
from moesim.errors import ConfigError

ReduceTime = float | Callable[[float], float]
"""Seconds to reduce one received chunk: a constant, or chunk bytes -> seconds."""


class RingCollective(RankStarted):
    """One ring collective of ``n_steps`` steps; ``reduce_steps`` of them (the first) reduce.

    ``done`` fires when every rank has finished (value: finish time in s);
    ``rank_done[r]`` when rank r has (value: its finish time).
    """

    def __init__(
        self,
        net: FlowNetwork,
        gpus: Sequence[int] | np.ndarray,
        size_bytes: float,
        *,
        n_steps: int,
        reduce_steps: int,
        reduce_s: ReduceTime = 0.0,
        tag: int = -1,
    ) -> None:
        self.net = net
        self.env: simpy.Environment = net.env
        self.gpus = np.asarray(gpus, dtype=np.int64)
        n = self.gpus.size
        validate_collective(n, size_bytes, reduce_s)
        self.n_steps = n_steps if n > 1 else 0
        self.reduce_steps = min(reduce_steps, self.n_steps)
        self.chunk_bytes = float(size_bytes) / n
        self.reduce_s = reduce_s
        self.tag = tag
        self.done: simpy.Event = self.env.event()
        self.rank_done: list[simpy.Event] = [self.env.event() for _ in range(n)]
        self._init_ranks(n)
        # Per-rank state in Python lists: every chunk reads and writes it (scalar access
        # to numpy arrays costs several times more).
        self._gpu: list[int] = self.gpus.tolist()
        self._sent = [0] * n  # next step each rank will send
        self._in_flight = [False] * n  # a rank's last chunk not yet delivered
        self._ready = [0] * n  # steps received (and reduced) per rank
        self._arrived = [[False] * max(self.n_steps, 1) for _ in range(n)]
        self._reducing = [False] * n
        self._n_done = 0
        self._groups = np.zeros((n, max(self.n_steps, 1)), dtype=np.int64)
        if self.n_steps:
            gids, events = net.expect_many(n * self.n_steps, 1)  # row-major: (rank, step)
            self._groups[:] = gids.reshape(n, self.n_steps)
            for i, event in enumerate(events):
                event.callbacks.append(self._on_arrival(*divmod(i, self.n_steps)))
        self._gid: list[list[int]] = self._groups.tolist()

    # ---------------------------------------------------------------- API
    @property
    def step_groups(self) -> np.ndarray:
        """Completion-group id of each (receiving rank, step): one flow each."""
        return self._groups

    # ----------------------------------------------------------- internals
    def _on_start(self, rank: int) -> None:
        self._try_send(rank)
        self._check_done(rank)

    def _on_arrival(self, rank: int, step: int) -> Callable[[simpy.Event], None]:
        def arrived(_: simpy.Event) -> None:
            self._arrived[rank][step] = True
            self._advance(rank)

        return arrived

    def _advance(self, rank: int) -> None:
        """Reduce (serially, in step order) whatever has arrived at ``rank``."""
        while not self._reducing[rank] and self._ready[rank] < self.n_steps:
            step = self._ready[rank]
            if not self._arrived[rank][step]:
                return
            delay = self._reduce_time(step)
            if delay > 0:
                self._reducing[rank] = True
                self.env.timeout(delay).callbacks.append(self._after_reduce(rank))
                return
            self._step_ready(rank)

    def _after_reduce(self, rank: int) -> Callable[[simpy.Event], None]:
        def reduced(_: simpy.Event) -> None:
            self._reducing[rank] = False
            self._step_ready(rank)
            self._advance(rank)

        return reduced

    def _step_ready(self, rank: int) -> None:
        self._ready[rank] += 1
        self._try_send(rank)
        self._check_done(rank)

    def _reduce_time(self, step: int) -> float:
        if step >= self.reduce_steps:
            return 0.0
        rs = self.reduce_s
        return float(rs(self.chunk_bytes) if callable(rs) else rs)

    def _try_send(self, rank: int) -> None:
        """Send ``rank``'s next step if it holds its input and its last chunk has drained."""
        step = self._sent[rank]
        if (self._in_flight[rank] or step >= self.n_steps or step > self._ready[rank]
                or not self._started[rank]):
            return
        self._sent[rank] = step + 1
        self._in_flight[rank] = True
        succ = rank + 1 if rank + 1 < len(self._gpu) else 0
        gid = self._gid[succ][step]
        self.net.drained(gid).callbacks.append(self._on_drained(rank))
        self.net.start_one(self._gpu[rank], self._gpu[succ], self.chunk_bytes, gid, self.tag)

    def _on_drained(self, rank: int) -> Callable[[simpy.Event], None]:
        def drained(_: simpy.Event) -> None:
            self._in_flight[rank] = False
            self._try_send(rank)

        return drained

    def _check_done(self, rank: int) -> None:
        event = self.rank_done[rank]
        if event.triggered or not self._started[rank] or self._ready[rank] < self.n_steps:
            return
        event.succeed(float(self.env.now))
        self._n_done += 1
        if self._n_done == self.gpus.size:
            self.done.succeed(float(self.env.now))


def validate_collective(n: int, size_bytes: float, reduce_s: ReduceTime) -> None:
    """ConfigError unless there is a GPU, the size is >= 0 and the reduce time is valid."""
    if n < 1:
        raise ConfigError("collective.gpus", "needs at least one GPU")
    if not size_bytes >= 0:
        raise ConfigError("collective.size_bytes", f"must be >= 0, got {size_bytes!r}")
    if not callable(reduce_s) and not reduce_s >= 0:
        raise ConfigError("collective.reduce_s", f"must be >= 0 s or a callable, got {reduce_s!r}")


def _ring(
    net: FlowNetwork, gpus: Sequence[int] | np.ndarray, size_bytes: float, steps: tuple[int, int],
    reduce_s: ReduceTime, tag: int, start: bool,
) -> RingCollective:
    """A ring of ``steps`` = (steps, reducing steps), started unless ``start`` is False."""
    ring = RingCollective(net, gpus, size_bytes, n_steps=steps[0], reduce_steps=steps[1],
                          reduce_s=reduce_s, tag=tag)
    return ring.start() if start else ring


def ring_reduce_scatter(
    net: FlowNetwork, gpus: Sequence[int] | np.ndarray, size_bytes: float, *,
    reduce_s: ReduceTime = 0.0, tag: int = -1, start: bool = True,
) -> RingCollective:
    """Ring reduce-scatter of a ``size_bytes`` buffer per rank (n - 1 reducing steps)."""
    n = len(gpus)
    return _ring(net, gpus, size_bytes, (n - 1, n - 1), reduce_s, tag, start)


def ring_all_gather(
    net: FlowNetwork, gpus: Sequence[int] | np.ndarray, size_bytes: float, *,
    tag: int = -1, start: bool = True,
) -> RingCollective:
    """Ring all-gather into a ``size_bytes`` buffer per rank (n - 1 copy steps)."""
    return _ring(net, gpus, size_bytes, (len(gpus) - 1, 0), 0.0, tag, start)


def ring_all_reduce(
    net: FlowNetwork, gpus: Sequence[int] | np.ndarray, size_bytes: float, *,
    reduce_s: ReduceTime = 0.0, tag: int = -1, start: bool = True,
) -> RingCollective:
    """Ring all-reduce: reduce-scatter then all-gather, 2(n - 1) steps."""
    n = len(gpus)
    return _ring(net, gpus, size_bytes, (2 * (n - 1), n - 1), reduce_s, tag, start)
