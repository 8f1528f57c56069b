"""Chrome Trace Event JSON of one simulated step (opens in ui.perfetto.dev).

Format (Chrome "Trace Event Format", the JSON object form): ``{"traceEvents": [...],
"displayTimeUnit": "ns"}``; every ``ts``/``dur`` is in MICROseconds (floats allowed).
Events used here:

- ``ph "M"`` metadata: ``process_name`` / ``thread_name`` / ``*_sort_index``;
- ``ph "X"`` complete events: one per (phase, rank) span, on the rank's ``compute``
  or ``a2a`` thread (pid = EP rank). A rank walks its phases one after another, so
  the spans of one thread never overlap (checked before writing);
- ``ph "C"`` counters: link utilisation (``args {"util": u}``) in the process
  ``links`` (pid = number of ranks), one track per link, the busiest ``top_links``;
- ``ph "s"``/``"f"`` flow events (cat ``critical``) chaining, phase after phase,
  the span of the rank that finished that phase last (those spans carry
  ``args.critical = true``), plus an instant ``ph "i"`` at each such finish.

It reads the run's record only: the result, its evidence (phases, finish times, GPU names)
and its timeline (phase starts, link load samples), :mod:`moesim.results.group_timeline`.
"""

from __future__ import annotations

import json
from itertools import pairwise
from pathlib import Path
from typing import Any

import numpy as np

from moesim.results.group_record import GroupEvidence
from moesim.results.group_timeline import GroupTimeline
from moesim.results.result import Result

US_PER_S = 1e6
COMPUTE_TID = 0
COMM_TID = 1
THREADS = {COMPUTE_TID: "compute", COMM_TID: "a2a"}
DEFAULT_TOP_LINKS = 48
FLOW_INSET_US = 1e-3  # flow anchors sit 1 ns inside the end of their span


def _meta(name: str, pid: int, args: dict[str, Any], tid: int = 0) -> dict[str, Any]:
    return {"ph": "M", "name": name, "pid": pid, "tid": tid, "args": args}


def label(ev: GroupEvidence, p: int) -> str:
    """Phase ``p``'s name in the trace and the saved run, e.g. ``L0.dispatch``."""
    return f"L{int(ev.layer[p])}.{ev.phase[p]}"


def parts(res: Result) -> tuple[GroupEvidence, GroupTimeline]:
    """``res``'s evidence and timeline (ValueError if it kept no timeline)."""
    if not isinstance(res.evidence, GroupEvidence) or not isinstance(res.timeline,
                                                                     GroupTimeline):
        raise ValueError("the result keeps no group timeline: run the group scenario with "
                         "timeline=True")
    return res.evidence, res.timeline


def _metadata(ev: GroupEvidence, links_pid: int) -> list[dict[str, Any]]:
    events = []
    for rank, gpu in enumerate(ev.gpu):
        label = f"rank {rank} ({gpu})"
        events.append(_meta("process_name", rank, {"name": label}))
        events.append(_meta("process_sort_index", rank, {"sort_index": rank}))
        for tid, name in THREADS.items():
            events.append(_meta("thread_name", rank, {"name": name}, tid))
            events.append(_meta("thread_sort_index", rank, {"sort_index": tid}, tid))
    events.append(_meta("process_name", links_pid, {"name": "links"}))
    events.append(_meta("process_sort_index", links_pid, {"sort_index": links_pid}))
    return events


def critical_ranks(ev: GroupEvidence) -> np.ndarray:
    """Per phase, the rank that finished it last (ties: the lowest rank)."""
    return np.argmax(ev.end_s, axis=1)


def _span_events(ev: GroupEvidence, tl: GroupTimeline, critical: np.ndarray
                 ) -> list[dict[str, Any]]:
    events = []
    for p, name in enumerate(ev.phase):
        a2a = bool(ev.is_a2a[p])
        tid = COMM_TID if a2a else COMPUTE_TID
        for rank in range(len(ev.gpu)):
            start, end = float(tl.start_s[p, rank]), float(ev.end_s[p, rank])
            args: dict[str, Any] = {"layer": int(ev.layer[p]), "phase": name, "rank": rank}
            if rank == critical[p]:
                args["critical"] = True
            events.append({
                "ph": "X", "name": label(ev, p), "cat": "a2a" if a2a else "compute",
                "pid": rank, "tid": tid, "ts": start * US_PER_S,
                "dur": (end - start) * US_PER_S, "args": args,
            })
    return events


def _critical_events(ev: GroupEvidence, tl: GroupTimeline, critical: np.ndarray
                     ) -> list[dict[str, Any]]:
    """An instant at each critical finish, and a flow chaining consecutive critical spans.

    Each flow leaves its span just before that span ends and arrives just before the next
    critical span ends (inside both slices, so Perfetto binds it to them). The last finish
    of a phase is never earlier than the last finish of the phase before (every rank
    finishes its phases in order), so the arrows point forward in time.
    """
    events: list[dict[str, Any]] = []
    anchors = []
    for p in range(len(ev.phase)):
        rank = int(critical[p])
        start_us = float(tl.start_s[p, rank]) * US_PER_S
        end_us = float(ev.end_s[p, rank]) * US_PER_S
        tid = COMM_TID if ev.is_a2a[p] else COMPUTE_TID
        inset_us = min((end_us - start_us) / 2, FLOW_INSET_US)
        anchors.append((rank, tid, end_us, end_us - inset_us))
        events.append({
            "ph": "i", "name": f"critical {label(ev, p)}", "cat": "critical", "s": "t",
            "pid": rank, "tid": tid, "ts": end_us,
        })
    for i, (src, dst) in enumerate(pairwise(anchors)):
        common = {"name": "critical path", "cat": "critical", "id": i}
        events.append({**common, "ph": "s", "pid": src[0], "tid": src[1], "ts": src[3]})
        arrive_us = min(max(dst[3], src[3]), dst[2])
        events.append({**common, "ph": "f", "bp": "e", "pid": dst[0], "tid": dst[1],
                       "ts": arrive_us})
    return events


def busiest_links(tl: GroupTimeline, top: int) -> np.ndarray:
    """Rows of ``tl``'s links (those that carried bytes), busiest (most bytes) first, at most
    ``top``."""
    return np.argsort(-tl.link_bytes, kind="stable")[:top]


def _counter_events(tl: GroupTimeline, links_pid: int, top: int) -> list[dict[str, Any]]:
    times, util = tl.times_s, tl.util
    events = []
    for link in busiest_links(tl, top):
        series = util[:, link]
        changed = np.ones(series.shape[0], dtype=bool)
        changed[1:] = series[1:] != series[:-1]
        name = f"{tl.link_names[link]} [{tl.link_tiers[link]}]"
        for t, u in zip(times[changed], series[changed], strict=True):
            events.append({
                "ph": "C", "name": name, "pid": links_pid, "tid": 0,
                "ts": float(t) * US_PER_S, "args": {"util": round(float(u), 6)},
            })
    return events


def check_sequential(events: list[dict[str, Any]]) -> None:
    """Raise ValueError unless the X events of each (pid, tid) are disjoint in time."""
    tracks: dict[tuple[int, int], list[tuple[float, float]]] = {}
    for ev in events:
        if ev["ph"] == "X":
            tracks.setdefault((ev["pid"], ev["tid"]), []).append((ev["ts"], ev["ts"] + ev["dur"]))
    for key, spans in tracks.items():
        spans.sort()
        for (_, end), (start, _) in pairwise(spans):
            if start < end - 1e-6:  # 1 ps of float slack, in us
                raise ValueError(f"overlapping spans on track pid={key[0]} tid={key[1]}")


def chrome_trace(res: Result, top_links: int = DEFAULT_TOP_LINKS) -> dict[str, Any]:
    """The trace of the group run recorded in ``res`` as a Chrome-trace JSON object."""
    ev, tl = parts(res)
    links_pid = len(ev.gpu)
    critical = critical_ranks(ev)
    spans = _span_events(ev, tl, critical)
    check_sequential(spans)
    events = (
        _metadata(ev, links_pid)
        + spans
        + _critical_events(ev, tl, critical)
        + _counter_events(tl, links_pid, top_links)
    )
    return {
        "traceEvents": events,
        "displayTimeUnit": "ns",
        "otherData": {"scenario": res.scenario, "seed": res.seed},
    }


def write_chrome_trace(
    res: Result, path: str | Path, top_links: int = DEFAULT_TOP_LINKS
) -> Path:
    """Write the trace of the run recorded in ``res`` to ``path`` (JSON); returns the path."""
    out = Path(path)
    out.write_text(json.dumps(chrome_trace(res, top_links), separators=(",", ":")))
    return out
