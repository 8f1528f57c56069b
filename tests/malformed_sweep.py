"""Corpus tables for ``moesim sweep``: a valid sweep spec and its malformed mutations."""

from __future__ import annotations

from typing import Any

from malformed_case import DROP

SWEEP: dict[str, Any] = {
    "name": "s",
    "base": "ep8-hot-expert",
    "set": {"workload.layers": 1, "workload.backward": False},
    "grid": {"router.hot_factor": [1.0, 2.0]},
    "seeds": {"count": 2},
}

SWEEP_MUTATIONS: list[tuple[str, object, str]] = [
    ("bogus", 1, "sweep.bogus"),
    ("base", DROP, "sweep.base"),
    ("base", 5, "sweep.base"),
    ("base", "no-such-scenario", "sweep.base"),
    ("base", "missing.yaml", "sweep.base"),
    ("set", "x", "sweep.set"),
    ("set", {"router.zzz": 1}, "router.zzz"),
    ("set", {"workload.ep": 0}, "workload.ep"),
    ("set", {"zzz": 1}, "zzz"),
    ("grid", "x", "sweep.grid"),
    ("grid", {"router.zzz": [1]}, "router.zzz"),
    ("grid", {"router.hot_factor": 2.0}, "sweep.grid.router.hot_factor"),
    ("grid", {"router.hot_factor": []}, "sweep.grid.router.hot_factor"),
    ("grid", {"workload.layers": [1, 2]}, "workload.layers"),
    ("grid", {"router.hot_factor": [1.0, 1.0]}, "sweep"),
    ("zip", {"router.alpha": [1, 2], "router.hot_factor": [1.0]}, "sweep.zip"),
    ("zip", "x", "sweep.zip"),
    ("seeds", [-1, 2], "sweep.seeds"),
    ("seeds", {"count": -1}, "sweep.seeds"),
    ("seeds", {"count": 1_000_000_000}, "sweep.seeds"),
    ("seeds", {"count": 1e9}, "sweep.seeds"),
    ("seeds", {"count": 2, "start": -5}, "sweep.seeds"),
    ("seeds", [1.5], "sweep.seeds"),
    ("seeds", "x", "sweep.seeds"),
    ("seeds", [], "sweep.seeds"),
    ("seeds", {"count": 2, "start": "x"}, "sweep.seeds"),
    ("seeds", {"bogus": 1}, "sweep.seeds"),
    ("name", [1], "sweep.name"),
    ("description", {"a": 1}, "sweep.description"),
    ("grid", {"router.hot_factor": [-1.0, -2.0]}, "router.hot_factor"),
    (
        "grid",
        {"router.hot_factor": list(range(1, 1001)), "router.alpha": list(range(1001))},
        "sweep",
    ),
]
