"""Group mode: simulate one EP group's layers and their counterfactuals, record the evidence,
attribute from the record."""

from __future__ import annotations

from typing import Any

import numpy as np

from moesim.fabric.build import build_graph, uncongested
from moesim.results.attribution import attribute
from moesim.results.result import LinkStat, RankStat, Result
from moesim.router import imbalance
from moesim.runner.group import Simulation, simulate
from moesim.runner.group_evidence import group_evidence, group_timeline
from moesim.scenario.schema import GroupSpec


def run_group(scn: GroupSpec, setting: dict[str, Any] | None = None,
              timeline: bool = False) -> Result:
    """Simulate ``scn`` (plus its balanced and uncongested counterfactuals) into a result;
    with ``timeline`` it also keeps the actual run's phase starts and link load samples
    (what ``--trace`` and ``--save-run`` write)."""
    graph = build_graph(scn.fabric)
    actual = simulate(scn, graph=graph)
    balanced = simulate(scn, graph=graph, balanced=True, ignore_slowdowns=True)
    free = simulate(scn, graph=uncongested(graph))
    evidence = group_evidence(actual, balanced, free)
    stragglers, collectives = attribute(evidence)
    step = actual.step_time_s
    wl = scn.workload
    return Result(
        scenario=scn.name,
        mode="group",
        setting=setting or {},
        seed=scn.seed,
        step_time_s=step,
        tokens_per_s=wl.tokens_per_rank * scn.ep / step,
        dropped_tokens=int(sum(r.dropped_total() for r in actual.routings)),
        balanced_step_time_s=balanced.step_time_s,
        uncongested_step_time_s=free.step_time_s,
        breakdown_s=_breakdown(actual),
        imbalance=_imbalance(actual),
        ranks=_ranks(actual),
        links=_links(actual),
        stragglers=stragglers,
        collectives=collectives,
        engine={
            "solves": actual.net.solves,
            "flows": actual.net.flows.n,
            "batch_window_rel": scn.fabric.batch_window_rel,
        },
        evidence=evidence,
        timeline=group_timeline(actual) if timeline else None,
    )


def _busy(sim: Simulation, a2a: bool) -> np.ndarray:
    mask = np.array([ph.is_a2a == a2a for ph in sim.trace.phases])
    return np.nansum((sim.trace.end_s - sim.trace.start_s)[mask], axis=0)


def _ranks(sim: Simulation) -> list[RankStat]:
    compute, comm = _busy(sim, False), _busy(sim, True)
    step = sim.step_time_s
    load = np.sum([r.rank_load() for r in sim.routings], axis=0)
    return [
        RankStat(
            rank=r,
            gpu=sim.fabric.gpu_name(int(g)),
            compute_s=float(compute[r]),
            comm_s=float(comm[r]),
            idle_s=float(step - compute[r] - comm[r]),
            expert_load=int(load[r]),
        )
        for r, g in enumerate(sim.gpus)
    ]


def _links(sim: Simulation) -> list[LinkStat]:
    st, fab, step = sim.net.stats, sim.fabric, sim.step_time_s
    used = np.flatnonzero(st.bytes > 0)
    return [
        LinkStat(
            id=fab.link_name(int(i)),
            tier=str(fab.tier[i]),
            bytes=float(st.bytes[i]),
            busy_s=float(st.busy_s[i]),
            peak_util=float(st.peak_util[i]),
            mean_util=float(st.bytes[i] / (fab.cap_Bps[i] * step)),
            peak_flows=int(st.peak_flows[i]),
        )
        for i in used[np.argsort(-st.bytes[used] / fab.cap_Bps[used])]
    ]


def _breakdown(sim: Simulation) -> dict[str, float]:
    """Critical-path-free summary: where the slowest rank's step went, by phase kind."""
    ends = np.maximum.accumulate(np.nanmax(sim.trace.end_s, axis=1))
    inc = np.diff(ends, prepend=0.0)
    out: dict[str, float] = {}
    for ph in sim.trace.phases:
        key = (
            "a2a"
            if ph.is_a2a
            else ("experts" if ph.name.startswith("experts") else "other_compute")
        )
        out[key] = out.get(key, 0.0) + float(inc[ph.index])
    return out


def _imbalance(sim: Simulation) -> dict[str, float]:
    per_layer = [imbalance(r) for r in sim.routings]
    return {
        "rank_ratio_max": max(m["rank_ratio"] for m in per_layer),
        "expert_ratio_max": max(m["expert_ratio"] for m in per_layer),
    }
