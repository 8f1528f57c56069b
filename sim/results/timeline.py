"""Save one run's timeline (per-rank spans, link utilisation) with its result, for plots.

The figures in ``plots/`` read only this file (and result / sweep files), never live
objects; it is written from the result record alone (its evidence and timeline). Layout of
the JSON (``format: moesim-run/1``)::

    scenario, seed, step_time_s, balanced_step_time_s, uncongested_step_time_s,
    tokens_per_s, dropped_tokens, breakdown_s {name: s}, stragglers [{rank, cause,
    excess_s, detail, link, phases}],
    ranks  [{rank, gpu}],
    phases [{index, layer, name, label, a2a, critical_rank}],
    start_s / end_s  [phase][rank]   (seconds),
    links  {id [...], tier [...], bytes [...], times_s [t...], util [[t][link]]},
    evidence {kind: "group", ...}   (what attribution read: moesim.results.run_file)

``links`` holds the links that carried bytes; ``util[t][j]`` is link j's utilisation
(load / achievable capacity) from ``times_s[t]`` until the next sample.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np

from moesim.results.result import Result
from moesim.results.run_file import evidence_dict
from moesim.results.trace import label, parts

FORMAT = "moesim-run/1"
UTIL_DECIMALS = 4


def _links(res: Result) -> dict[str, Any]:
    _, tl = parts(res)
    return {
        "id": list(tl.link_names),
        "tier": list(tl.link_tiers),
        "bytes": [float(b) for b in tl.link_bytes],
        "times_s": [float(t) for t in tl.times_s],
        "util": np.round(tl.util, UTIL_DECIMALS).tolist(),
    }


def _phases(res: Result) -> list[dict[str, Any]]:
    ev, _ = parts(res)
    critical = np.argmax(ev.end_s, axis=1)
    return [
        {
            "index": p,
            "layer": int(ev.layer[p]),
            "name": name,
            "label": label(ev, p),
            "a2a": bool(ev.is_a2a[p]),
            "critical_rank": int(critical[p]),
        }
        for p, name in enumerate(ev.phase)
    ]


def run_record(result: Result) -> dict[str, Any]:
    """The saved-run record of the group run recorded in ``result`` (with its timeline)."""
    ev, tl = parts(result)
    return {
        "format": FORMAT,
        "scenario": result.scenario,
        "seed": result.seed,
        "step_time_s": result.step_time_s,
        "balanced_step_time_s": result.balanced_step_time_s,
        "uncongested_step_time_s": result.uncongested_step_time_s,
        "tokens_per_s": result.tokens_per_s,
        "dropped_tokens": result.dropped_tokens,
        "breakdown_s": dict(result.breakdown_s),
        "stragglers": [asdict(s) for s in result.stragglers],
        "ranks": [{"rank": r, "gpu": gpu} for r, gpu in enumerate(ev.gpu)],
        "phases": _phases(result),
        "start_s": tl.start_s.tolist(),
        "end_s": ev.end_s.tolist(),
        "links": _links(result),
        "evidence": evidence_dict(result),
    }


def save_run(result: Result, path: str | Path) -> Path:
    """Write :func:`run_record` of ``result`` to ``path`` as JSON."""
    out = Path(path)
    out.write_text(json.dumps(run_record(result), separators=(",", ":")))
    return out
