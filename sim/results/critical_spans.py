"""The walk record's spans as the critical-path walk looks them up: per rank, in order of end
time, found by time (:class:`Spans`); and the pieces of the path (:class:`PathSegment`)."""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass

from moesim.results.walk_record import WalkRecord

PATH_CATEGORIES = ("compute", "optimizer", "a2a", "p2p", "tp", "cp", "dp", "other")


@dataclass(frozen=True)
class PathSegment:
    """One piece of the path: ``rank`` computing or, for a transfer, waiting on ``link``."""

    rank: int
    start_s: float
    end_s: float
    category: str  # one of PATH_CATEGORIES
    what: str
    link: str = ""
    tier: str = ""


class Spans:
    """Per rank, the rows of the spans of positive length in order of end time (as recorded);
    the columns the walk reads as Python lists."""

    def __init__(self, rec: WalkRecord, tol: float) -> None:
        self.rec, self.tol = rec, tol
        self.t0, self.t1 = rec.t0_s.tolist(), rec.t1_s.tolist()
        self.cat = [rec.strings[c] for c in rec.category.tolist()]
        self.lane = rec.lane.tolist()
        self.of: list[list[int]] = [[] for _ in range(rec.world_size)]
        for i, rank in enumerate(rec.rank.tolist()):
            if self.t1[i] - self.t0[i] > tol:
                self.of[rank].append(i)
        self.ends = [[self.t1[i] for i in rows] for rows in self.of]

    def before(self, rank: int, t: float, lane: int) -> int | None:
        """The span of ``rank`` ending last at or before ``t``: of ``lane`` on a tie, else
        a compute span, else the first recorded."""
        ends, rows = self.ends[rank], self.of[rank]
        i = bisect_right(ends, t + self.tol) - 1
        if i < 0:
            return None
        ties = [rows[j] for j in range(i, -1, -1) if ends[j] >= ends[i] - self.tol]
        for pick in (lambda r: self.lane[r] == lane, lambda r: self.cat[r] == "compute"):
            found = [r for r in ties if pick(r)]
            if found:
                return found[0]
        return ties[-1]

    def last_compute(self, rank: int, t: float) -> int | None:
        """The last compute span of ``rank`` ending at or before ``t``."""
        i = bisect_right(self.ends[rank], t + self.tol) - 1
        while i >= 0 and self.cat[self.of[rank][i]] != "compute":
            i -= 1
        return self.of[rank][i] if i >= 0 else None

    def label(self, i: int) -> str:
        """What span ``i`` ran, e.g. ``F mb0 vs1 L3 after_dispatch``."""
        rec, cat = self.rec, self.cat[i]
        if rec.pass_kind[i] < 0:
            return cat
        layer, phase = int(rec.layer[i]), rec.strings[rec.phase[i]]
        head = (f"{rec.strings[rec.pass_kind[i]]} mb{int(rec.mb[i])} vs{int(rec.vstage[i])}"
                + (f" L{layer}" if layer >= 0 else ""))
        if cat == "compute":
            return f"{head} " + (f"after_{phase}" if phase else "start")
        return f"{head} {phase or cat}" if cat == "a2a_exposed" else f"{head} {cat}"
