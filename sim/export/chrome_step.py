"""Chrome Trace Event JSON of a whole simulated step (opens in ui.perfetto.dev).

The JSON object form (``{"traceEvents": [...], "displayTimeUnit": "ns", "otherData": {...}}``),
``ts``/``dur`` in microseconds, as the one-group trace (:mod:`moesim.results.trace`), whose
metadata and counter helpers this reuses:

* a process per simulated rank (``pid`` = rank) with a thread per track: compute, a2a
  (all-to-all), tp (TP / ETP rings), cp, pp (waiting for pipeline inputs), dp (gradient
  reduce-scatters and parameter all-gathers), optimizer, and ``critical path``;
* ``ph "X"`` spans: the rank computing, or blocked in that kind of communication (``args``:
  collective, group, bytes). Spans of one thread never overlap: where a rank's two concurrent
  passes (DualPipe FB overlap) wait at once, the later wait goes to a second thread of
  the same track (``a2a (2)``);
* ``ph "C"`` counters in the process ``links``: the busiest links' mean utilisation per time
  bin (exact bin averages, :mod:`moesim.step.linkbins`);
* the critical path (full mode): its segments as spans on each rank's ``critical path`` thread,
  chained by ``ph "s"``/``"f"`` flow arrows from one rank to the next.

Size limit: with more than ``max_spans`` spans, only every k-th rank is kept (plus the ranks on
the critical path); ``otherData.sampling`` says which and why.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from itertools import pairwise
from pathlib import Path
from typing import Any

from moesim.export.record import TRACKS, Span, StepRecord
from moesim.results.trace import _meta, check_sequential

US_PER_S = 1e6
CRITICAL_TID = 99
MAX_SPANS = 400_000
LANES = 10  # tid = track index x LANES + lane


def _lanes(spans: list[Span]) -> list[tuple[int, Span]]:
    """(lane, span) with the spans of each lane disjoint (greedy, in start order)."""
    ends: list[float] = []
    out = []
    for s in sorted(spans, key=lambda s: (s.start_s, s.end_s)):
        lane = next((i for i, e in enumerate(ends) if e <= s.start_s + 1e-12), len(ends))
        if lane == len(ends):
            ends.append(s.end_s)
        ends[lane] = s.end_s
        out.append((min(lane, LANES - 1), s))
    return out


def _args(spans: list[Span]) -> dict[str, Any]:
    comms = [s.comm for s in spans if s.comm is not None]
    if not comms:
        return {}
    return {"ops": [{"op": c.kind, "group": c.group_kind, "ranks": len(c.group),
                     "bytes": c.size_bytes} for c in comms]}


def _merged(spans: Iterable[Span]) -> list[list[Span]]:
    """Spans of one rank and track with the same times (the DP and EDP rings of one wait)."""
    groups: dict[tuple[float, float], list[Span]] = {}
    for s in spans:
        groups.setdefault((s.start_s, s.end_s), []).append(s)
    return list(groups.values())


def span_events(record: StepRecord, ranks: set[int]) -> tuple[list[dict[str, Any]], set[int]]:
    """X events of ``ranks``; the tids used."""
    events, tids = [], set()
    by_key: dict[tuple[int, str], list[Span]] = {}
    for s in record.spans:
        if s.rank in ranks:
            by_key.setdefault((s.rank, s.track), []).append(s)
    for (rank, track), spans in by_key.items():
        heads = {id(g[0]): g for g in _merged(spans)}
        for lane, s in _lanes([g[0] for g in heads.values()]):
            tid = TRACKS.index(track) * LANES + lane
            tids.add(tid)
            group = heads[id(s)]
            events.append({"ph": "X", "name": " + ".join(g.name for g in group), "cat": track,
                           "pid": rank, "tid": tid, "ts": s.start_s * US_PER_S,
                           "dur": (s.end_s - s.start_s) * US_PER_S, "args": _args(group)})
    return events, tids


def _metadata(record: StepRecord, ranks: set[int], tids: set[int], links_pid: int
              ) -> list[dict[str, Any]]:
    events = []
    for rank in sorted(ranks):
        events += [_meta("process_name", rank, {"name": f"rank {rank}"}),
                   _meta("process_sort_index", rank, {"sort_index": rank})]
        for tid in sorted(tids | {CRITICAL_TID}):
            track, lane = (("critical path", 0) if tid == CRITICAL_TID
                           else (TRACKS[tid // LANES], tid % LANES))
            name = track if lane == 0 else f"{track} ({lane + 1})"
            events += [_meta("thread_name", rank, {"name": name}, tid),
                       _meta("thread_sort_index", rank, {"sort_index": tid}, tid)]
    events += [_meta("process_name", links_pid, {"name": "links (utilisation per bin)"}),
               _meta("process_sort_index", links_pid, {"sort_index": links_pid})]
    return events


def critical_events(record: StepRecord, ranks: set[int]) -> list[dict[str, Any]]:
    """The critical path's segments as spans on the ``critical path`` threads, plus flow
    arrows between consecutive segments."""
    segs = [s for s in record.critical if s["rank"] in ranks and s["end_s"] > s["start_s"]]
    events = [{"ph": "X", "name": f"{s['category']}: {s['what']}", "cat": "critical",
               "pid": s["rank"], "tid": CRITICAL_TID, "ts": s["start_s"] * US_PER_S,
               "dur": (s["end_s"] - s["start_s"]) * US_PER_S,
               "args": {"link": s.get("link", ""), "tier": s.get("tier", "")}} for s in segs]
    for i, (a, b) in enumerate(pairwise(segs)):
        at = min(a["end_s"], b["end_s"]) * US_PER_S - 1e-3
        events.append({"ph": "s", "id": i, "name": "critical", "cat": "critical",
                       "pid": a["rank"], "tid": CRITICAL_TID, "ts": at})
        events.append({"ph": "f", "bp": "e", "id": i, "name": "critical", "cat": "critical",
                       "pid": b["rank"], "tid": CRITICAL_TID,
                       "ts": max(b["start_s"] * US_PER_S + 1e-3, at)})
    return events


def counter_events(record: StepRecord, links_pid: int) -> list[dict[str, Any]]:
    """Per link kept, its utilisation at each bin start (only where it changes)."""
    series = record.links
    events: list[dict[str, Any]] = []
    if series is None:
        return events
    for name, util in zip(series.names, series.util, strict=True):
        last = None
        for t, u in zip(series.starts_s, util, strict=True):
            if u != last:
                events.append({"ph": "C", "name": name, "pid": links_pid, "tid": 0,
                               "ts": t * US_PER_S, "args": {"util": u}})
                last = u
    return events


def kept_ranks(record: StepRecord, max_spans: int) -> tuple[set[int], dict[str, Any]]:
    """The ranks to draw, and the sampling note for ``otherData``."""
    ranks = list(record.ranks)
    every = max(1, -(-len(record.spans) // max_spans))
    path = {s["rank"] for s in record.critical}
    kept = set(ranks[::every]) | (path & set(ranks))
    note: dict[str, Any] = {"spans": len(record.spans), "max_spans": max_spans,
                            "ranks_simulated": len(ranks), "ranks_kept": len(kept)}
    if every > 1:
        note["rule"] = (f"over max_spans: every {every}th simulated rank kept, plus the "
                        f"ranks on the critical path")
    return kept, note


def step_trace(record: StepRecord, max_spans: int = MAX_SPANS,
               extra: dict[str, Any] | None = None) -> dict[str, Any]:
    """The Chrome-trace JSON object of ``record``."""
    ranks, sampling = kept_ranks(record, max_spans)
    links_pid = record.world_size
    spans, tids = span_events(record, ranks)
    check_sequential(spans)
    events = (_metadata(record, ranks, tids, links_pid) + spans
              + critical_events(record, ranks) + counter_events(record, links_pid))
    other = {"scenario": record.scenario, "mode": record.mode, "world_size": record.world_size,
             "sampling": sampling, **(extra or {})}
    if record.links is not None:
        other["links"] = {"kept": len(record.links.names), "bin_width_s": record.links.width_s,
                          "links_that_carried_bytes": record.links.links_total}
    return {"traceEvents": events, "displayTimeUnit": "ns", "otherData": other}


def write_step_trace(record: StepRecord, path: str | Path, max_spans: int = MAX_SPANS,
                     extra: dict[str, Any] | None = None) -> Path:
    """Write :func:`step_trace` to ``path``; the path."""
    out = Path(path)
    out.write_text(json.dumps(step_trace(record, max_spans, extra),
                              separators=(",", ":")))
    return out
