"""Tree all-reduce as flows: reduce up a binary tree, broadcast down it, pipelined in chunks.

Test-side only (no scenario uses a tree yet; see ``collective_registry``).

Rank 0 is the root; rank r's children are 2r + 1 and 2r + 2 (heap order), so
GPU ``gpus[r]`` hosts tree node r. The buffer is cut into ``n_chunks`` chunks.
Going up, a rank reduces chunk c once it holds its own copy and chunk c from
every child (``reduce_s`` per received child chunk, serially), then sends it to
its parent; going down, a rank forwards each result chunk to all its children.
Each connection carries one chunk at a time (the next leaves when the previous
has arrived), which is what pipelines the chunks: this is the single-tree
variant of NCCL's tree algorithm (NCCL uses two complementary trees to use
both link directions; that refinement is not modelled). A rank is done when it
holds the whole result; the collective when every rank is.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import simpy

from moesim.collectives.base import RankStarted
from moesim.collectives.ring import ReduceTime, validate_collective
from moesim.engine.network import FlowNetwork
from moesim.errors import ConfigError


class TreeAllReduce(RankStarted):
    """One pipelined binary-tree all-reduce over ``gpus`` (build, then :meth:`start`)."""

    def __init__(
        self,
        net: FlowNetwork,
        gpus: Sequence[int] | np.ndarray,
        size_bytes: float,
        *,
        n_chunks: int = 8,
        reduce_s: ReduceTime = 0.0,
        tag: int = -1,
    ) -> None:
        self.net = net
        self.env: simpy.Environment = net.env
        self.gpus = np.asarray(gpus, dtype=np.int64)
        n = self.gpus.size
        validate_collective(n, size_bytes, reduce_s)
        if not isinstance(n_chunks, int) or n_chunks < 1:
            raise ConfigError("collective.n_chunks", f"must be an integer >= 1, got {n_chunks!r}")
        self.k = n_chunks
        self.chunk_bytes = float(size_bytes) / n_chunks
        self.reduce_s = reduce_s
        self.tag = tag
        self.children = [[c for c in (2 * r + 1, 2 * r + 2) if c < n] for r in range(n)]
        self.done: simpy.Event = self.env.event()
        self.rank_done: list[simpy.Event] = [self.env.event() for _ in range(n)]
        self._init_ranks(n)
        self._got_up = np.zeros((n, n_chunks), dtype=np.int64)  # child chunks arrived
        self._reduced = np.zeros(n, dtype=np.int64)  # chunks reduced, in order
        self._reducing = np.zeros(n, dtype=bool)
        self._sent_up = np.zeros(n, dtype=np.int64)
        self._have = np.zeros(n, dtype=np.int64)  # result chunks held
        self._sent_down = np.zeros(n, dtype=np.int64)
        self._busy_up = np.zeros(n, dtype=bool)
        self._busy_down = np.zeros(n, dtype=bool)
        self._n_done = 0

    # ---------------------------------------------------------------- API
    # ----------------------------------------------------------- internals
    def _on_start(self, rank: int) -> None:
        self._pump(rank)

    def _pump(self, rank: int) -> None:
        """Do whatever ``rank`` can do now: reduce, send up, send down, finish."""
        if not self._started[rank]:
            return
        self._reduce(rank)
        if rank == 0:
            self._have[0] = self._reduced[0]
        else:
            self._send_up(rank)
        self._send_down(rank)
        if self._have[rank] == self.k and not self.rank_done[rank].triggered:
            self.rank_done[rank].succeed(float(self.env.now))
            self._n_done += 1
            if self._n_done == self.gpus.size:
                self.done.succeed(float(self.env.now))

    def _reduce(self, rank: int) -> None:
        n_child = len(self.children[rank])
        while not self._reducing[rank] and self._reduced[rank] < self.k:
            if self._got_up[rank, self._reduced[rank]] < n_child:
                return
            delay = n_child * self._reduce_one()
            if delay > 0:
                self._reducing[rank] = True
                self.env.timeout(delay).callbacks.append(self._after_reduce(rank))
                return
            self._reduced[rank] += 1

    def _after_reduce(self, rank: int) -> Callable[[simpy.Event], None]:
        def reduced(_: simpy.Event) -> None:
            self._reducing[rank] = False
            self._reduced[rank] += 1
            self._pump(rank)

        return reduced

    def _reduce_one(self) -> float:
        rs = self.reduce_s
        return float(rs(self.chunk_bytes) if callable(rs) else rs)

    def _send_up(self, rank: int) -> None:
        if self._busy_up[rank] or self._sent_up[rank] >= self._reduced[rank]:
            return
        chunk, parent = int(self._sent_up[rank]), (rank - 1) // 2
        self._sent_up[rank] += 1
        self._busy_up[rank] = True

        def arrived(_: simpy.Event) -> None:
            self._busy_up[rank] = False
            self._got_up[parent, chunk] += 1
            self._pump(parent)
            self._pump(rank)

        self._flows(rank, [parent], arrived)

    def _send_down(self, rank: int) -> None:
        kids = self.children[rank]
        if not kids or self._busy_down[rank] or self._sent_down[rank] >= self._have[rank]:
            return
        self._sent_down[rank] += 1
        self._busy_down[rank] = True

        def arrived(_: simpy.Event) -> None:
            self._busy_down[rank] = False
            for kid in kids:
                self._have[kid] += 1
                self._pump(kid)
            self._pump(rank)

        self._flows(rank, kids, arrived)

    def _flows(self, rank: int, to: list[int], arrived: Callable[[simpy.Event], None]) -> None:
        gid, event = self.net.expect(len(to))
        event.callbacks.append(arrived)
        self.net.start(
            np.full(len(to), self.gpus[rank]), self.gpus[to],
            np.full(len(to), self.chunk_bytes), gid, self.tag,
        )


def tree_all_reduce(
    net: FlowNetwork, gpus: Sequence[int] | np.ndarray, size_bytes: float, *,
    n_chunks: int = 8, reduce_s: ReduceTime = 0.0, tag: int = -1, start: bool = True,
) -> TreeAllReduce:
    """Pipelined binary-tree all-reduce of a ``size_bytes`` buffer per rank."""
    tree = TreeAllReduce(net, gpus, size_bytes, n_chunks=n_chunks, reduce_s=reduce_s, tag=tag)
    return tree.start() if start else tree
