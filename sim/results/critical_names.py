"""Who is named on the critical path (:mod:`moesim.results.critical_path`).

Named contributors overlap (they do not partition the path): each late sender jumped to (a
*straggler*; reason in :mod:`moesim.results.attribution`'s words: slow_gpu, expert_imbalance
with its hot experts, else late_peer / pipeline) with the waits it caused on the path and its
excess: its compute on the path minus its EP peers' mean for the same ops (the detail also
gives how late it reached the worst op against its peers' mean); each link with its transfer
time on the path; each rank with its compute on the path.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

import numpy as np

from moesim.calibration.training import HOT_RATIO
from moesim.results.critical_spans import PathSegment
from moesim.results.critical_walker import Jump, Walker

EXPERT_PHASES = ("dispatch", "combine_bwd")  # the compute after these is the experts' GEMMs


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


def stage_text(w: Walker, rank: int) -> str:
    per = w.rec.world_size // w.rec.pp
    s = w.stage_of(rank)
    return f"stage {s} (ranks {s * per}-{(s + 1) * per - 1})"


def why(w: Walker, rank: int, send_s: float, pipeline: bool) -> tuple[str, str, int, list[int]]:
    """Cause, reason, layer and hot experts of ``rank`` being late to send at ``send_s``."""
    rec = w.rec
    if rec.slowdown[rank] > 1:
        return "slow_gpu", f"computes {rec.slowdown[rank]:.2f}x slower than its peers", -1, []
    prev = w.spans.last_compute(rank, send_s)  # past any TP / ETP waits
    if prev is not None and rec.pass_kind[prev] >= 0:
        layer, phase = int(rec.layer[prev]), rec.strings[rec.phase[prev]]
        if phase in EXPERT_PHASES and layer >= 0:
            k, e = int(np.flatnonzero(rec.moe_layers == layer)[0]), int(rec.ep_coord[rank])
            load = rec.rank_load[k]
            ratio = float(load[e] / max(load.mean(), 1e-30))
            if ratio >= HOT_RATIO:
                hot = [int(x) for x in rec.hot_experts[k, e] if x >= 0]
                return "expert_imbalance", (f"hosts hot experts {hot} of layer {layer}: "
                                            f"{ratio:.2f}x the mean token load"), layer, hot
    if pipeline:
        return "pipeline", "the previous stage's pass", -1, []
    return "late_peer", "itself late", -1, []


def stragglers(w: Walker) -> list[Contributor]:
    """Each late sender the walk jumped to, with the waits it caused on the path."""
    groups: dict[int, list[Jump]] = defaultdict(list)
    for j in w.jumps:
        groups[j.rank].append(j)
    out = []
    for rank, js in groups.items():
        worst = max(js, key=lambda j: j.waited_s)
        cause, reason, layer, hot = why(w, rank, worst.send_s, worst.category == "bubble")
        late = ("" if np.isnan(worst.excess_s) else
                f"; it reached the op {worst.excess_s * 1e3:.3f} ms after its peers' mean")
        excess = compute_excess(w, rank)
        detail = (f"{stage_text(w, worst.waiter)}, {worst.what}: rank {worst.waiter} waited "
                  f"{worst.waited_s * 1e3:.3f} ms for rank {rank} ({reason}{late}); rank "
                  f"{rank}'s compute on the path took {excess * 1e3:.3f} ms longer than the "
                  "mean of its EP peers' for the same ops")
        out.append(Contributor("straggler", cause, sum(j.waited_s for j in js), rank, excess,
                               detail, count=len(js), layer=layer, experts=tuple(hot)))
    return out


def compute_excess(w: Walker, rank: int) -> float:
    """``rank``'s compute on the path minus the mean of its EP peers' for the same ops."""
    ops = {seg.what for seg in w.segments if seg.rank == rank and seg.category == "compute"}
    members = w.rec.ep_groups[w.rec.ep_group[rank]].tolist()
    peers = [p for p in members if p != rank and w.spans.of[p]]  # simulated ones
    if not ops or not peers:
        return 0.0
    total = dict.fromkeys([rank, *peers], 0.0)
    for r in total:
        for i in w.spans.of[r]:
            if w.spans.cat[i] == "compute" and w.spans.label(i) in ops:
                total[r] += w.spans.t1[i] - w.spans.t0[i]
    return total[rank] - float(np.mean([total[p] for p in peers]))


def link_totals(w: Walker) -> list[Contributor]:
    """Per link: its transfer time on the path."""
    return _totals(w, "link")


def compute_totals(w: Walker) -> list[Contributor]:
    """Per rank: its compute time on the path."""
    return _totals(w, "compute")


def _totals(w: Walker, kind: str) -> list[Contributor]:
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
            detail = (f"rank {worst.rank}, {stage_text(w, worst.rank)}: {time_s * 1e3:.3f} ms "
                      f"of compute on the path; longest {worst.what} "
                      f"{(worst.end_s - worst.start_s) * 1e3:.3f} ms")
        out.append(Contributor(kind, kind, time_s, worst.rank, detail=detail,
                               link=worst.link, count=len(segs)))
    return out
