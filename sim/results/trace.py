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
"""

from __future__ import annotations

import json
from itertools import pairwise
from pathlib import Path
from typing import Any

import numpy as np

from moesim.results.simulation import GroupRun

US_PER_S = 1e6
COMPUTE_TID = 0
COMM_TID = 1
THREADS = {COMPUTE_TID: "compute", COMM_TID: "a2a"}
DEFAULT_TOP_LINKS = 48
FLOW_INSET_US = 1e-3  # flow anchors sit 1 ns inside the end of their span


def _meta(name: str, pid: int, args: dict[str, Any], tid: int = 0) -> dict[str, Any]:
    return {"ph": "M", "name": name, "pid": pid, "tid": tid, "args": args}


def _metadata(sim: GroupRun, links_pid: int) -> list[dict[str, Any]]:
    events = []
    for rank, gpu in enumerate(sim.gpus):
        label = f"rank {rank} ({sim.fabric.gpu_name(int(gpu))})"
        events.append(_meta("process_name", rank, {"name": label}))
        events.append(_meta("process_sort_index", rank, {"sort_index": rank}))
        for tid, name in THREADS.items():
            events.append(_meta("thread_name", rank, {"name": name}, tid))
            events.append(_meta("thread_sort_index", rank, {"sort_index": tid}, tid))
    events.append(_meta("process_name", links_pid, {"name": "links"}))
    events.append(_meta("process_sort_index", links_pid, {"sort_index": links_pid}))
    return events


def critical_ranks(sim: GroupRun) -> np.ndarray:
    """Per phase, the rank that finished it last (ties: the lowest rank)."""
    return np.argmax(sim.trace.end_s, axis=1)


def _span_events(sim: GroupRun, critical: np.ndarray) -> list[dict[str, Any]]:
    tr = sim.trace
    events = []
    for ph in tr.phases:
        tid = COMM_TID if ph.is_a2a else COMPUTE_TID
        for rank in range(sim.gpus.size):
            start, end = float(tr.start_s[ph.index, rank]), float(tr.end_s[ph.index, rank])
            args: dict[str, Any] = {"layer": ph.layer, "phase": ph.name, "rank": rank}
            if rank == critical[ph.index]:
                args["critical"] = True
            events.append({
                "ph": "X", "name": ph.label, "cat": "a2a" if ph.is_a2a else "compute",
                "pid": rank, "tid": tid, "ts": start * US_PER_S,
                "dur": (end - start) * US_PER_S, "args": args,
            })
    return events


def _critical_events(sim: GroupRun, critical: np.ndarray) -> list[dict[str, Any]]:
    """An instant at each critical finish, and a flow chaining consecutive critical spans.

    Each flow leaves its span just before that span ends and arrives just before the next
    critical span ends (inside both slices, so Perfetto binds it to them). The last finish
    of a phase is never earlier than the last finish of the phase before (every rank
    finishes its phases in order), so the arrows point forward in time.
    """
    tr = sim.trace
    events: list[dict[str, Any]] = []
    anchors = []
    for ph in tr.phases:
        rank = int(critical[ph.index])
        start_us = float(tr.start_s[ph.index, rank]) * US_PER_S
        end_us = float(tr.end_s[ph.index, rank]) * US_PER_S
        tid = COMM_TID if ph.is_a2a else COMPUTE_TID
        inset_us = min((end_us - start_us) / 2, FLOW_INSET_US)
        anchors.append((rank, tid, end_us, end_us - inset_us))
        events.append({
            "ph": "i", "name": f"critical {ph.label}", "cat": "critical", "s": "t",
            "pid": rank, "tid": tid, "ts": end_us,
        })
    for i, (src, dst) in enumerate(pairwise(anchors)):
        common = {"name": "critical path", "cat": "critical", "id": i}
        events.append({**common, "ph": "s", "pid": src[0], "tid": src[1], "ts": src[3]})
        arrive_us = min(max(dst[3], src[3]), dst[2])
        events.append({**common, "ph": "f", "bp": "e", "pid": dst[0], "tid": dst[1],
                       "ts": arrive_us})
    return events


def busiest_links(sim: GroupRun, top: int) -> np.ndarray:
    """Indices of the links that carried bytes, busiest (most bytes) first, at most ``top``."""
    moved = sim.net.stats.bytes
    used = np.flatnonzero(moved > 0)
    return used[np.argsort(-moved[used], kind="stable")][:top]


def _counter_events(sim: GroupRun, links_pid: int, top: int) -> list[dict[str, Any]]:
    times, util = sim.net.stats.timeline()
    events = []
    for link in busiest_links(sim, top):
        series = util[:, link]
        changed = np.ones(series.shape[0], dtype=bool)
        changed[1:] = series[1:] != series[:-1]
        name = f"{sim.fabric.link_name(int(link))} [{sim.fabric.tier[link]}]"
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


def chrome_trace(sim: GroupRun, top_links: int = DEFAULT_TOP_LINKS) -> dict[str, Any]:
    """The trace of ``sim`` as a Chrome-trace JSON object."""
    links_pid = int(sim.gpus.size)
    critical = critical_ranks(sim)
    spans = _span_events(sim, critical)
    check_sequential(spans)
    events = (
        _metadata(sim, links_pid)
        + spans
        + _critical_events(sim, critical)
        + _counter_events(sim, links_pid, top_links)
    )
    return {
        "traceEvents": events,
        "displayTimeUnit": "ns",
        "otherData": {"scenario": sim.scenario.name, "seed": sim.scenario.seed},
    }


def write_chrome_trace(
    sim: GroupRun, path: str | Path, top_links: int = DEFAULT_TOP_LINKS
) -> Path:
    """Write the trace of ``sim`` to ``path`` (JSON); returns the path."""
    out = Path(path)
    out.write_text(json.dumps(chrome_trace(sim, top_links), separators=(",", ":")))
    return out
