"""Save one run's timeline (per-rank spans, link utilisation) with its result, for plots.

The figures in ``plots/`` read only this file (and result / sweep files), never live
objects. Layout of the JSON (``format: moesim-run/1``)::

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
from moesim.results.simulation import GroupRun

FORMAT = "moesim-run/1"
UTIL_DECIMALS = 4


def _links(sim: GroupRun) -> dict[str, Any]:
    stats, fab = sim.net.stats, sim.fabric
    used = np.flatnonzero(stats.bytes > 0)
    times, util = stats.timeline()
    return {
        "id": [fab.link_name(int(i)) for i in used],
        "tier": [str(fab.tier[i]) for i in used],
        "bytes": [float(stats.bytes[i]) for i in used],
        "times_s": [float(t) for t in times],
        "util": np.round(util[:, used].astype(np.float64), UTIL_DECIMALS).tolist(),
    }


def _phases(sim: GroupRun) -> list[dict[str, Any]]:
    critical = np.argmax(sim.trace.end_s, axis=1)
    return [
        {
            "index": ph.index,
            "layer": ph.layer,
            "name": ph.name,
            "label": ph.label,
            "a2a": ph.is_a2a,
            "critical_rank": int(critical[ph.index]),
        }
        for ph in sim.trace.phases
    ]


def run_record(sim: GroupRun, result: Result) -> dict[str, Any]:
    """The saved-run record of ``sim`` (the actual run behind ``result``)."""
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
        "ranks": [
            {"rank": r, "gpu": sim.fabric.gpu_name(int(g))} for r, g in enumerate(sim.gpus)
        ],
        "phases": _phases(sim),
        "start_s": sim.trace.start_s.tolist(),
        "end_s": sim.trace.end_s.tolist(),
        "links": _links(sim),
        "evidence": evidence_dict(result),
    }


def save_run(sim: GroupRun, result: Result, path: str | Path) -> Path:
    """Write :func:`run_record` of ``sim`` and ``result`` to ``path`` as JSON."""
    out = Path(path)
    out.write_text(json.dumps(run_record(sim, result), separators=(",", ":")))
    return out
