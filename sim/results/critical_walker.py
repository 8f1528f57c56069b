"""The walk itself (:mod:`moesim.results.critical_path`): from the step's end back to t = 0,
segment by segment, leaving a late sender's wait for the sender."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from moesim.results.critical_spans import PathSegment, Spans
from moesim.results.walk_record import WalkRecord

WAIT_CATEGORY = {"a2a_exposed": "a2a", "bubble": "p2p", "tp_exposed": "tp", "cp_exposed": "cp",
                 "dp_exposed": "dp"}


@dataclass(frozen=True)
class Jump:
    """The walk left ``waiter``'s wait for ``rank``, which sent at ``send_s``."""

    waiter: int
    what: str
    category: str  # the wait's category
    waited_s: float
    rank: int
    send_s: float
    excess_s: float


class Walker:
    """Walks one record back from the step's end (:meth:`walk`), keeping segments and jumps."""

    def __init__(self, rec: WalkRecord) -> None:
        self.rec = rec
        self.step_s = float(np.nanmax(rec.end_s))
        self.tol = 1e-9 * max(self.step_s, 1e-9)
        self.spans = Spans(rec, self.tol)
        self.segments: list[PathSegment] = []
        self.jumps: list[Jump] = []

    def walk(self) -> None:
        rec, spans, tol = self.rec, self.spans, self.tol
        rank = int(np.nanargmax(rec.end_s))
        t, lane = self.step_s, -1
        for _ in range(4 * rec.n_spans + 16):
            if t <= tol:
                return
            i = spans.before(rank, t, lane)
            if i is None or spans.t1[i] < t - tol:  # a gap: the optimizer, or untracked
                t0 = 0.0 if i is None else spans.t1[i]
                cat = "optimizer" if t0 >= rec.last_op_s[rank] - tol else "other"
                self._seg(rank, t0, t, cat, cat)
                t = t0
                continue
            lane, t0_i = spans.lane[i], spans.t0[i]
            if spans.cat[i] == "compute":
                self._seg(rank, t0_i, t, "compute", spans.label(i))
                t = t0_i
                continue
            cat = WAIT_CATEGORY.get(spans.cat[i], "other")
            what, link = rec.strings[rec.rel_what[i]] or spans.label(i), int(rec.rel_link[i])
            sender, send = int(rec.rel_rank[i]), float(rec.rel_send_s[i])
            if sender >= 0 and sender != rank and send > t0_i + tol:
                send_s = min(send, t)
                self._seg(rank, send_s, t, cat, what, link)
                self.jumps.append(Jump(rank, what, spans.cat[i], send_s - t0_i, sender, send_s,
                                       self.lateness(i)))
                rank, t, lane = sender, send_s, -1
            else:
                self._seg(rank, t0_i, t, cat, what, link)
                t = t0_i
        raise RuntimeError("critical path walk did not reach t = 0")

    def lateness(self, i: int) -> float:
        """How much later than its peers' mean the releaser of wait ``i`` reached the op."""
        row = int(self.rec.rel_a2a[i])
        if row < 0:
            return float(self.rec.rel_excess_s[i])
        sent, local = self.rec.a2a_send_s[row], int(self.rec.rel_local[i])
        return float(sent[local] - np.nanmean(np.delete(sent, local)))

    def _seg(self, rank: int, t0: float, t1: float, cat: str, what: str,
             link: int = -1) -> None:
        name, tier = ((self.rec.link_names[link], self.rec.link_tiers[link]) if link >= 0
                      else ("", ""))
        self.segments.append(PathSegment(rank, t0, t1, cat, what, name, tier))

    def stage_of(self, rank: int) -> int:
        return rank // (self.rec.world_size // self.rec.pp)
