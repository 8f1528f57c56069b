"""The step's critical path: which stage, micro-batch, rank, expert or link set its end.

The rank programs record every compute span and every wait span (:meth:`StepState.record`),
each wait with what released it. The walk starts at the rank that finished last, at the
step's end, and goes back in time until t = 0:

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

Named contributors overlap (they do not partition the path): each late sender jumped to (a
*straggler*; reason in :mod:`moesim.results.attribution`'s words: slow_gpu, expert_imbalance with
its hot experts, else late_peer / pipeline) with the waits it caused on the path and its
excess: its compute on the path minus its EP peers' mean for the same ops (the detail also
gives how late it reached the worst op against its peers' mean); each link with its transfer
time on the path; each rank with its compute on the path. A compute span is named by its
pass and the last all-to-all before it in that pass (``after_dispatch``: the experts;
``after_combine``: unpermute, then the next layer's attention).
"""

from __future__ import annotations

from bisect import bisect_right
from collections import defaultdict
from dataclasses import asdict, dataclass
from types import MappingProxyType
from typing import Any

import numpy as np

from moesim.results.attribution import HOT_RATIO
from moesim.router import RoutingResult
from moesim.step.critical_release import Releases
from moesim.step.plan import route_layer
from moesim.step.state import Span, StepState

PATH_CATEGORIES = ("compute", "optimizer", "a2a", "p2p", "tp", "cp", "dp", "other")
WAIT_CATEGORY = {"a2a_exposed": "a2a", "bubble": "p2p", "tp_exposed": "tp", "cp_exposed": "cp",
                 "dp_exposed": "dp"}
EXPERT_PHASES = ("dispatch", "combine_bwd")  # the compute after these is the experts' GEMMs
TOP = 10


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


@dataclass(frozen=True)
class Contributor:
    """A named cause on the path: a straggler, a link or a rank's compute."""

    kind: str  # straggler | link | compute
    cause: str  # slow_gpu | expert_imbalance | late_peer | pipeline | link | compute
    time_s: float  # straggler: waits it caused on the path; link/compute: path time
    rank: int = -1
    excess_s: float = 0.0  # straggler: its compute on the path minus its EP peers' mean
    detail: str = ""
    link: str = ""
    count: int = 1
    layer: int = -1  # expert_imbalance: the layer of the worst wait
    experts: tuple[int, ...] = ()  # expert_imbalance: the straggler's hottest experts there


@dataclass(frozen=True)
class CriticalPath:
    """The walk's result; segments in time order, sums over PATH_CATEGORIES and stages."""

    step_time_s: float
    end_rank: int
    segments: tuple[PathSegment, ...]
    by_category_s: MappingProxyType[str, float]
    by_stage_s: tuple[float, ...]
    contributors: tuple[Contributor, ...]  # the TOP largest, stragglers, links and compute
    straggler: Contributor | None  # the straggler that caused the most waiting on the path

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


@dataclass(frozen=True)
class _Jump:
    waiter: int
    what: str
    category: str  # the wait's category
    waited_s: float
    rank: int
    send_s: float
    excess_s: float


class _Spans:
    """Per rank, the spans of positive length in order of end time (as recorded)."""

    def __init__(self, st: StepState, tol: float) -> None:
        self.tol = tol
        self.of: list[list[Span]] = [[] for _ in range(st.spec.layout.world_size)]
        for sp in st.spans:
            if sp[2] - sp[1] > tol:
                self.of[sp[0]].append(sp)
        self.ends = [[sp[2] for sp in spans] for spans in self.of]

    def before(self, rank: int, t: float, lane: object) -> Span | None:
        """The span of ``rank`` ending last at or before ``t``: of ``lane`` on a tie, else
        a compute span, else the first recorded."""
        ends, spans = self.ends[rank], self.of[rank]
        i = bisect_right(ends, t + self.tol) - 1
        if i < 0:
            return None
        ties = [spans[j] for j in range(i, -1, -1) if ends[j] >= ends[i] - self.tol]
        for pick in (lambda s: s[4] is lane, lambda s: s[3] == "compute"):
            found = [s for s in ties if pick(s)]
            if found:
                return found[0]
        return ties[-1]

    def last_compute(self, rank: int, t: float) -> Span | None:
        """The last compute span of ``rank`` ending at or before ``t``."""
        i = bisect_right(self.ends[rank], t + self.tol) - 1
        while i >= 0 and self.of[rank][i][3] != "compute":
            i -= 1
        return self.of[rank][i] if i >= 0 else None


def _label(sp: Span) -> str:
    where = sp[5]
    if where is None:
        return sp[3]
    kind, mb, vs, layer, phase = where
    head = f"{kind} mb{mb} vs{vs}" + (f" L{layer}" if layer >= 0 else "")
    if sp[3] == "compute":
        return f"{head} " + (f"after_{phase}" if phase else "start")
    return f"{head} {phase or sp[3]}" if sp[3] == "a2a_exposed" else f"{head} {sp[3]}"


class _Walker:
    def __init__(self, st: StepState) -> None:
        self.st = st
        self.step_s = float(np.nanmax(st.end_s))
        self.tol = 1e-9 * max(self.step_s, 1e-9)
        self.spans = _Spans(st, self.tol)
        self.release = Releases(st)
        self.segments: list[PathSegment] = []
        self.jumps: list[_Jump] = []
        self.routes: dict[int, RoutingResult] = {}

    def walk(self) -> None:
        rank = int(np.nanargmax(self.st.end_s))
        t, lane = self.step_s, None
        for _ in range(4 * len(self.st.spans) + 16):
            if t <= self.tol:
                return
            sp = self.spans.before(rank, t, lane)
            if sp is None or sp[2] < t - self.tol:  # a gap: the optimizer, or untracked
                t0 = 0.0 if sp is None else sp[2]
                cat = "optimizer" if t0 >= self.st.last_op_s[rank] - self.tol else "other"
                self._seg(rank, t0, t, cat, cat)
                t = t0
                continue
            lane = sp[4]
            if sp[3] == "compute":
                self._seg(rank, sp[1], t, "compute", _label(sp))
                t = sp[1]
                continue
            rel = self.release.of(sp)
            cat, what = WAIT_CATEGORY.get(sp[3], "other"), rel.what or _label(sp)
            if rel.rank >= 0 and rel.rank != rank and rel.send_s > sp[1] + self.tol:
                send_s = min(rel.send_s, t)
                self._seg(rank, send_s, t, cat, what, rel.link)
                self.jumps.append(_Jump(rank, what, sp[3], send_s - sp[1], rel.rank, send_s,
                                        rel.excess_s))
                rank, t, lane = rel.rank, send_s, None
            else:
                self._seg(rank, sp[1], t, cat, what, rel.link)
                t = sp[1]
        raise RuntimeError("critical path walk did not reach t = 0")

    def _seg(self, rank: int, t0: float, t1: float, cat: str, what: str,
             link: int = -1) -> None:
        fab = self.st.net.fabric
        name, tier = (fab.link_name(link), str(fab.tier[link])) if link >= 0 else ("", "")
        self.segments.append(PathSegment(rank, t0, t1, cat, what, name, tier))

    # ------------------------------------------------------------------ naming
    def stage_of(self, rank: int) -> int:
        return rank // (self.st.spec.layout.world_size // self.st.spec.layout.pp)

    def why(self, rank: int, send_s: float, pipeline: bool) -> tuple[str, str, int, list[int]]:
        """Cause, reason, layer and hot experts of ``rank`` being late to send at ``send_s``."""
        st = self.st
        if st.slowdown[rank] > 1:
            return "slow_gpu", f"computes {st.slowdown[rank]:.2f}x slower than its peers", -1, []
        prev = self.spans.last_compute(rank, send_s)  # past any TP / ETP waits
        where = prev[5] if prev is not None else None
        if where is not None and where[4] in EXPERT_PHASES and where[3] >= 0:
            layer, e = where[3], st.coords[rank]["ep"]
            if layer not in self.routes:
                self.routes[layer] = route_layer(st.spec, layer)
            routing = self.routes[layer]
            load = routing.rank_load()
            ratio = float(load[e] / max(load.mean(), 1e-30))
            if ratio >= HOT_RATIO:
                hot = routing.hot_experts(e, 3)
                return "expert_imbalance", (f"hosts hot experts {hot} of layer {layer}: "
                                            f"{ratio:.2f}x the mean token load"), layer, hot
        if pipeline:
            return "pipeline", "the previous stage's pass", -1, []
        return "late_peer", "itself late", -1, []


def _stage_text(w: _Walker, rank: int) -> str:
    per = w.st.spec.layout.world_size // w.st.spec.layout.pp
    s = w.stage_of(rank)
    return f"stage {s} (ranks {s * per}-{(s + 1) * per - 1})"


def _stragglers(w: _Walker) -> list[Contributor]:
    groups: dict[int, list[_Jump]] = defaultdict(list)
    for j in w.jumps:
        groups[j.rank].append(j)
    out = []
    for rank, js in groups.items():
        worst = max(js, key=lambda j: j.waited_s)
        cause, why, layer, hot = w.why(rank, worst.send_s, worst.category == "bubble")
        late = ("" if np.isnan(worst.excess_s) else
                f"; it reached the op {worst.excess_s * 1e3:.3f} ms after its peers' mean")
        excess = _compute_excess(w, rank)
        detail = (f"{_stage_text(w, worst.waiter)}, {worst.what}: rank {worst.waiter} waited "
                  f"{worst.waited_s * 1e3:.3f} ms for rank {rank} ({why}{late}); rank "
                  f"{rank}'s compute on the path took {excess * 1e3:.3f} ms longer than the "
                  "mean of its EP peers' for the same ops")
        out.append(Contributor("straggler", cause, sum(j.waited_s for j in js), rank, excess,
                               detail, count=len(js), layer=layer, experts=tuple(hot)))
    return out


def _compute_excess(w: _Walker, rank: int) -> float:
    """``rank``'s compute on the path minus the mean of its EP peers' for the same ops."""
    ops = {seg.what for seg in w.segments if seg.rank == rank and seg.category == "compute"}
    peers = [p for p in w.st.ep_group[rank] if p != rank and w.spans.of[p]]  # simulated ones
    if not ops or not peers:
        return 0.0
    total = dict.fromkeys([rank, *peers], 0.0)
    for r in total:
        for sp in w.spans.of[r]:
            if sp[3] == "compute" and _label(sp) in ops:
                total[r] += sp[2] - sp[1]
    return total[rank] - float(np.mean([total[p] for p in peers]))


def _totals(w: _Walker, kind: str) -> list[Contributor]:
    """Per link (``kind`` "link") or per rank ("compute"): its time on the path."""
    per: dict[object, list[PathSegment]] = defaultdict(list)
    for seg in w.segments:
        if seg.link if kind == "link" else seg.category == "compute":
            per[seg.link if kind == "link" else seg.rank].append(seg)
    out = []
    for segs in per.values():
        time_s = sum(s.end_s - s.start_s for s in segs)
        worst = max(segs, key=lambda s: s.end_s - s.start_s)
        if kind == "link":
            detail = (f"link {worst.link} (tier {worst.tier}): {time_s * 1e3:.3f} ms of transfer "
                      f"on the path in {len(segs)} waits; longest {worst.what} into rank "
                      f"{worst.rank}")
        else:
            detail = (f"rank {worst.rank}, {_stage_text(w, worst.rank)}: {time_s * 1e3:.3f} ms "
                      f"of compute on the path; longest {worst.what} "
                      f"{(worst.end_s - worst.start_s) * 1e3:.3f} ms")
        out.append(Contributor(kind, kind, time_s, worst.rank, detail=detail,
                               link=worst.link, count=len(segs)))
    return out


def critical_path(st: StepState) -> CriticalPath:
    """Walk the finished step ``st`` back from its end; see the module docstring."""
    w = _Walker(st)
    w.walk()
    segs = tuple(reversed(w.segments))
    by_cat = dict.fromkeys(PATH_CATEGORIES, 0.0)
    by_stage = [0.0] * st.spec.layout.pp
    for seg in segs:
        by_cat[seg.category] += seg.end_s - seg.start_s
        by_stage[w.stage_of(seg.rank)] += seg.end_s - seg.start_s
    stragglers = _stragglers(w)
    named = sorted([*stragglers, *_totals(w, "link"), *_totals(w, "compute")],
                   key=lambda c: -c.time_s)
    return CriticalPath(
        step_time_s=w.step_s,
        end_rank=int(np.nanargmax(st.end_s)),
        segments=segs,
        by_category_s=MappingProxyType(by_cat),
        by_stage_s=tuple(by_stage),
        contributors=tuple(named[:TOP]),
        straggler=max(stragglers, key=lambda c: c.time_s, default=None),
    )
