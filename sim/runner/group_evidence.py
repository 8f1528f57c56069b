"""Fill a group run's evidence record (:class:`GroupEvidence`) from the simulated runs, and
on request its timeline (:class:`GroupTimeline`).

The one place that reads the simulator's objects for attribution: the phase trace, the
routings, each all-to-all's byte matrix and completion values (the last-arriving flow per
receiver), the flow table, the routes and the link statistics. Attribution
(:mod:`moesim.results.attribution`) then reads only the record.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from moesim.results.attribution import phase_ends
from moesim.results.group_record import GroupEvidence
from moesim.results.group_timeline import GroupTimeline
from moesim.runner.group import Simulation

HOT_TOP = 3  # experts named per hot rank


def group_evidence(actual: Simulation, balanced: Simulation, free: Simulation) -> GroupEvidence:
    """The record attribution reads: ``actual`` and its balanced-router and uncongested-core
    counterfactuals (module docstring of :mod:`moesim.results.group_record`)."""
    phases = actual.trace.phases
    return GroupEvidence(
        phase=tuple(ph.name for ph in phases),
        layer=np.array([ph.layer for ph in phases], dtype=np.int64),
        is_a2a=np.array([ph.is_a2a for ph in phases], dtype=bool),
        end_s=actual.trace.end_s.copy(),
        balanced_ends_s=phase_ends(balanced.trace.end_s),
        uncongested_ends_s=phase_ends(free.trace.end_s),
        **_ranks(actual),
        **_all_to_alls(actual),
    )


def group_timeline(sim: Simulation) -> GroupTimeline:
    """Phase starts per rank and the load samples of the links that carried bytes."""
    stats, fab = sim.net.stats, sim.fabric
    used = np.flatnonzero(stats.bytes > 0)
    times, util = stats.timeline()
    return GroupTimeline(
        start_s=sim.trace.start_s.copy(),
        link_names=tuple(fab.link_name(int(i)) for i in used),
        link_tiers=tuple(str(fab.tier[i]) for i in used),
        link_bytes=stats.bytes[used].astype(np.float64),
        times_s=np.asarray(times, dtype=np.float64),
        util=util[:, used].astype(np.float64),
    )


def _ranks(sim: Simulation) -> dict[str, Any]:
    """Per rank: GPU name, slowdown; per (layer, rank): token load and hottest experts."""
    n = sim.gpus.size
    hot = np.full((len(sim.routings), n, HOT_TOP), -1, dtype=np.int64)
    for y, routing in enumerate(sim.routings):
        for rank in range(n):
            top = routing.hot_experts(rank, top=HOT_TOP)
            hot[y, rank, : len(top)] = top
    return {"gpu": tuple(sim.fabric.gpu_name(int(g)) for g in sim.gpus),
            "slowdown": np.asarray(sim.slowdown, dtype=np.float64).copy(),
            "rank_load": np.array([r.rank_load() for r in sim.routings], dtype=np.int64),
            "hot_experts": hot}


def _all_to_alls(sim: Simulation) -> dict[str, Any]:
    """Per (all-to-all phase, rank): bytes in and out, the last sender; per phase, the last
    rank's last flow's route and its links' utilisation (and the link table)."""
    trace, n = sim.trace, sim.gpus.size
    into, out = np.zeros(trace.end_s.shape), np.zeros(trace.end_s.shape)
    sender = np.tile(np.arange(n), (len(trace.phases), 1))
    routes: dict[int, tuple[np.ndarray, np.ndarray]] = {}
    for ph in (ph for ph in trace.phases if ph.is_a2a):
        size = trace.a2a[ph.index].size_bytes.copy()
        np.fill_diagonal(size, 0.0)
        into[ph.index], out[ph.index] = size.sum(axis=0), size.sum(axis=1)
        for rank in range(n):
            flow = _last_flow(sim, ph.index, rank)
            if flow >= 0:
                src = int(sim.net.flows.col["src"][flow])
                sender[ph.index, rank] = int(np.flatnonzero(sim.gpus == src)[0])
        last = int(np.nanargmax(trace.end_s[ph.index]))  # the rank attribution charges
        routes[ph.index] = _route_util(sim, _last_flow(sim, ph.index, last))
    links, util, names, tiers = _link_table(sim, routes, len(trace.phases))
    return {"into_bytes": into, "out_bytes": out, "last_sender": sender, "last_links": links,
            "last_util": util, "link_names": names, "link_tiers": tiers}


def _last_flow(sim: Simulation, phase: int, rank: int) -> int:
    """Id of the flow whose arrival completed ``rank``'s part of all-to-all ``phase``
    (-1: none)."""
    value = sim.trace.a2a[phase].received(rank).value
    return int(value) if isinstance(value, int | np.integer) else -1


def _route_util(sim: Simulation, flow: int) -> tuple[np.ndarray, np.ndarray]:
    """The links on ``flow``'s route and each one's mean utilisation while it ran. ``flow``
    -1 (nothing arrived) reads the flow table's last row, as attribution always has."""
    col = sim.net.flows.col
    ptr, length = int(col["pair_ptr"][flow]), int(col["pair_len"][flow])
    links, _ = sim.net.pairs.route(ptr, length)
    util = sim.net.stats.mean_util(links, float(col["start_s"][flow]), float(col["drain_s"][flow]))
    return np.asarray(links, dtype=np.int64), np.asarray(util, dtype=np.float64)


def _link_table(
    sim: Simulation, routes: dict[int, tuple[np.ndarray, np.ndarray]], n_phases: int
) -> tuple[np.ndarray, np.ndarray, tuple[str, ...], tuple[str, ...]]:
    """Routes as rows of a table of the links they use, -1 / NaN padded to the longest."""
    used = sorted({int(link) for links, _ in routes.values() for link in links})
    row = {link: i for i, link in enumerate(used)}
    width = max([links.size for links, _ in routes.values()] + [1])
    links = np.full((n_phases, width), -1, dtype=np.int64)
    util = np.full((n_phases, width), np.nan)
    for p, (route, use) in routes.items():
        links[p, : route.size] = [row[int(link)] for link in route]
        util[p, : route.size] = use
    fab = sim.fabric
    return (links, util, tuple(fab.link_name(link) for link in used),
            tuple(str(fab.tier[link]) for link in used))
