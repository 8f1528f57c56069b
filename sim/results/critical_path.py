"""The step's critical path: which stage, micro-batch, rank, expert or link set its end.

A function of the step's walk record (:class:`moesim.results.walk_record.WalkRecord`) alone:
the rank programs record every compute span and every wait span, each wait with what
released it. The walk starts at the rank that finished last, at the step's end, and goes back
in time until t = 0:

* a compute span is on the path: charged to its rank (and stage, micro-batch, layer);
* a gap between spans (the optimizer step, not recorded as a span) likewise;
* a wait span ended when its input arrived. If the input's sender started sending after the
  wait began (a *late* sender), the wait up to that send is the sender's doing: the walk
  jumps to the sender at its send time (a pipeline bubble, a slow or overloaded EP peer, a
  late DP peer) and only the transfer after the send stays on this rank, charged to the
  link that bottlenecked the last-arriving flow. Otherwise the whole wait is transfer.

Senders: a pipeline input's sending rank; the sender of an all-to-all's last-arriving flow
into the rank (the completion group's value); a ring collective's (DP/EDP, TP) last member to
join. CP K/V arrivals (and fast mode's estimated collectives) name no sender: transfer.
Segments tile [0, step end]: they add up to the step time exactly.

Named contributors (:mod:`moesim.results.critical_names`) overlap: they do not partition the
path. A compute span is named by its pass and the last all-to-all before it in that pass
(``after_dispatch``: the experts; ``after_combine``: unpermute, then the next layer's
attention).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from types import MappingProxyType
from typing import Any

import numpy as np

from moesim.results.critical_names import Contributor, compute_totals, link_totals, stragglers
from moesim.results.critical_spans import PATH_CATEGORIES, PathSegment
from moesim.results.critical_walker import Walker
from moesim.results.walk_record import WalkRecord

__all__ = ["PATH_CATEGORIES", "Contributor", "CriticalPath", "PathSegment", "walk"]

TOP = 10


@dataclass(frozen=True)
class CriticalPath:
    """The walk's result; segments in time order, sums over PATH_CATEGORIES and stages.
    ``record``: the walk record it was read from (saved with a run, so that the loaded run
    walks to the same path)."""

    step_time_s: float
    end_rank: int
    segments: tuple[PathSegment, ...]
    by_category_s: MappingProxyType[str, float]
    by_stage_s: tuple[float, ...]
    contributors: tuple[Contributor, ...]  # the TOP largest, stragglers, links and compute
    straggler: Contributor | None  # the straggler that caused the most waiting on the path
    record: WalkRecord | None = field(default=None, compare=False, repr=False)

    @property
    def stages(self) -> tuple[int, ...]:
        """Stages the path passes through, ascending."""
        return tuple(s for s, t in enumerate(self.by_stage_s) if t > 0)

    def to_dict(self) -> dict[str, Any]:
        """Plain types, for JSON (segments left out: there can be thousands)."""
        return {
            "step_time_s": self.step_time_s,
            "end_rank": self.end_rank,
            "n_segments": len(self.segments),
            "by_category_s": dict(self.by_category_s),
            "by_stage_s": list(self.by_stage_s),
            "contributors": [asdict(c) for c in self.contributors],
            "straggler": asdict(self.straggler) if self.straggler else None,
        }


def walk(rec: WalkRecord) -> CriticalPath:
    """Walk the finished step recorded in ``rec`` back from its end (module docstring)."""
    w = Walker(rec)
    w.walk()
    segs = tuple(reversed(w.segments))
    by_cat = dict.fromkeys(PATH_CATEGORIES, 0.0)
    by_stage = [0.0] * rec.pp
    for seg in segs:
        by_cat[seg.category] += seg.end_s - seg.start_s
        by_stage[w.stage_of(seg.rank)] += seg.end_s - seg.start_s
    late = stragglers(w)
    named = sorted([*late, *link_totals(w), *compute_totals(w)], key=lambda c: -c.time_s)
    return CriticalPath(
        step_time_s=w.step_s,
        end_rank=int(np.nanargmax(rec.end_s)),
        segments=segs,
        by_category_s=MappingProxyType(by_cat),
        by_stage_s=tuple(by_stage),
        contributors=tuple(named[:TOP]),
        straggler=max(late, key=lambda c: c.time_s, default=None),
        record=rec,
    )
