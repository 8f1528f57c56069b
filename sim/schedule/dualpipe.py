"""DualPipe's per-rank order and its point-to-point commits, re-stated from the source.

deepseek-ai/DualPipe ``dualpipe/dualpipe.py`` (``DualPipe.step``, commit bb214e8), read and
re-stated here call for call (the order itself is summarised in
:mod:`moesim.schedule.builders`). Beside the ops, the source decides when each pipeline
transfer happens:

* ``_recv_forward`` / ``_recv_backward`` / ``_send_forward`` / ``_send_backward`` only append
  an ``irecv`` / ``isend`` to ``comm_ops``; a chunk's sends are appended after its compute.
* ``_commit_and_wait_comm``, at the start of every ``_forward_chunk``, ``_backward_chunk``,
  ``_forward_backward_chunk`` and ``_weight_chunk`` (and once at the end of ``step``), posts
  every appended op in one ``dist.batch_isend_irecv`` and waits for each request before the
  chunk computes.

So a chunk's output leaves only at the rank's next commit, and that commit also waits until
the output is received, which NCCL completes only once the peer has posted the matching
receive ("Rank peer needs to call ncclRecv", "point-to-point calls within a group will be
blocking until that group of calls completes": NCCL User Guide, ``ncclSend`` and
"Point-to-point communication", 2.18+). Some receives are posted one chunk early: in step 2
the far forward's commit also takes the next near forward's input, in step 3 the W's commit
the next far forward's. :func:`dualpipe_commits` gives, per rank, what each commit posts
(:class:`~moesim.schedule.ops.Post`); :mod:`moesim.step.sends` runs them.
"""

from __future__ import annotations

from collections import deque
from functools import lru_cache

from moesim.schedule.ops import Op, Pass, Post, ScheduleOps, StageCommits, bwd, fwd, fwd_bwd, wgt


class _DualPipeRank:
    """One rank of ``DualPipe.step``: its ops and the transfers each commit posts. Phase 0 is
    the rank's near direction (chunk 0 on the first half of the ranks), phase 1 the far one;
    per chunk, forwards, backwards, sends and receives each go in micro-batch order; deferred
    weight gradients first in, first out."""

    def __init__(self, rank: int, pp: int, m: int) -> None:
        self.second_half = int(rank >= pp // 2)
        self.first, self.last = rank == 0, rank == pp - 1
        self.half = m // 2
        # per chunk: forwards, backwards computed; F outputs, B outputs sent; F, B inputs posted
        self.n = {k: [0, 0] for k in ("F", "B", "sF", "sB", "rF", "rB")}
        self.deferred: deque[tuple[int, int]] = deque()
        self.ops: list[Op] = []
        self.commits: list[tuple[Post, ...]] = []
        self.queue: list[Post] = []

    def _chunk(self, phase: int) -> int:
        return phase ^ self.second_half

    def _take(self, counter: str, chunk: int) -> int:
        self.n[counter][chunk] += 1
        return chunk * self.half + self.n[counter][chunk] - 1

    def _entry(self, chunk: int) -> bool:  # the chunk's first virtual stage is on this rank
        return (self.first and chunk == 0) or (self.last and chunk == 1)

    def _exit(self, chunk: int) -> bool:  # ... its last (the loss)
        return (self.first and chunk == 1) or (self.last and chunk == 0)

    def post(self, send: bool, kind: str, phase: int) -> None:
        """Append a send of the next output (or a receive of the next input) of ``kind``
        passes in ``phase`` to the queue the next commit posts; none where the source skips
        it: an F's input or a B's output at the chunk's entry, an F's output or a B's input
        at its exit (the loss)."""
        c = self._chunk(phase)
        at_entry = (kind == "F") != send  # F input, B output
        if self._entry(c) if at_entry else self._exit(c):
            return
        self.queue.append(Post(send, Pass("F" if kind == "F" else "B",
                                          self._take(("s" if send else "r") + kind, c), c)))

    def _commit(self, op: Op | None) -> None:
        self.commits.append(tuple(self.queue))
        self.queue = []
        if op is not None:
            self.ops.append(op)

    def f(self, phase: int, recv: bool = True, send: bool = True) -> None:
        if recv:
            self.post(False, "F", phase)
        c = self._chunk(phase)
        self._commit(fwd(self._take("F", c), c))
        if send:
            self.post(True, "F", phase)

    def b(self, phase: int, defer_w: bool = False, recv: bool = True, send: bool = True) -> None:
        if recv:
            self.post(False, "B", phase)
        c = self._chunk(phase)
        mb = self._take("B", c)
        if defer_w:
            self.deferred.append((mb, c))
        self._commit(bwd(mb, c, defer_w))
        if send:
            self.post(True, "B", phase)

    def w(self) -> None:
        self._commit(wgt(*self.deferred.popleft()))

    def fb(self, f_phase: int, b_phase: int, recv_f: bool = True) -> None:
        if recv_f:
            self.post(False, "F", f_phase)
        self.post(False, "B", b_phase)
        cf, cb = self._chunk(f_phase), self._chunk(b_phase)
        self._commit(fwd_bwd(self._take("F", cf), self._take("B", cb), cf, cb))
        self.post(True, "F", f_phase)
        self.post(True, "B", b_phase)


def _steps_1_to_3(r: _DualPipeRank, half_pp: int, h: int) -> None:
    middle = h == half_pp - 1
    for _ in range(2 * (half_pp - h - 1)):  # (1) nF0
        r.f(0)
    r.post(False, "F", 0)  # (2) nF0F1: the next near input posted one chunk early
    for i in range(h + 1):
        r.f(0, recv=False, send=middle)
        r.post(False, "F", 0)
        r.f(1, send=not middle or i < h)
        if not middle:
            r.post(True, "F", 0)
    for _ in range(half_pp - h - 1):  # (3) nB1W1F1
        r.b(1, defer_w=True)
        r.post(False, "F", 1)
        r.w()
        r.f(1, recv=False)


@lru_cache(maxsize=8)
def _dualpipe_rank(rank: int, pp: int, m: int) -> _DualPipeRank:
    half_pp, h = pp // 2, min(rank, pp - 1 - rank)
    r = _DualPipeRank(rank, pp, m)
    _steps_1_to_3(r, half_pp, h)
    for i in range(m // 2 - pp + h + 1):  # (4) nF0B1F1B0
        if i == 0 and h == half_pp - 1:  # the middle ranks: apart, sends reordered
            r.f(0, recv=False, send=False)
            r.post(True, "F", 1)
            r.b(1, send=False)
            r.post(True, "F", 0)
            r.post(True, "B", 1)
        else:
            r.fb(0, 1, recv_f=i > 0)
        r.fb(1, 0)
    for _ in range(half_pp - h - 1):  # (5) nB1F1B0
        r.b(1)
        r.fb(1, 0)
    defer = False
    for i in range(h + 1):  # (6) nB1B0, the second half deferring W
        defer = defer or (i == (h + 1) // 2 and h % 2 == 1)
        r.b(1, defer)
        defer = defer or (i == (h + 1) // 2 and h % 2 == 0)
        r.b(0, defer)
    for _ in range(half_pp - h - 1):  # (7) nWB0
        r.w()
        r.b(0, defer_w=True)
    for _ in range(h + 1):  # (8) nW
        r.w()
    r._commit(None)  # the final commit: the last sends
    assert not r.deferred and not r.queue
    return r


def dualpipe(pp: int, m: int, v: int) -> ScheduleOps:
    """DualPipe (DeepSeek-V3): two mirrored chunks per rank fed from both ends, F/B/W split."""
    return tuple(tuple(_dualpipe_rank(s, pp, m).ops) for s in range(pp))


def dualpipe_commits(pp: int, m: int, v: int) -> tuple[StageCommits, ...]:
    """Per rank, what each of its commits posts: entry ``k`` before op ``k``, then the final
    one (:data:`~moesim.schedule.ops.StageCommits`)."""
    return tuple(tuple(_dualpipe_rank(s, pp, m).commits) for s in range(pp))
