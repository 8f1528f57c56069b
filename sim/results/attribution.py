"""Straggler attribution: which rank, expert or link made the step slow, and by how much.

The step is a sequence of phases every rank walks through. Let T[p] be the
time the last rank finished phase p; the step time is T[last], and the
increments dT[p] = T[p] - T[p-1] add up to it exactly. The same scenario is
also simulated under two counterfactuals:

- *balanced*: the uniform router (balanced in expectation) and no slowed GPUs;
- *uncongested*: the actual routing on a fabric whose switch-to-switch links
  are unlimited (only GPU NVLink, PCIe and NIC ports still bound traffic).

A phase's excess over a counterfactual is its dT minus the counterfactual's
dT. It is charged to the rank that finished the phase last (the *critical*
rank), with the reason read off the run: a slowed GPU; a rank whose experts
took more than their share (naming the hot experts); or, against the
uncongested fabric, the busiest switch link on the path of the last transfer
into that rank (naming it and its tier). Each excess says how much sooner the
step would end without that one cause.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import numpy as np

from moesim.calibration import HOT_RATIO
from moesim.results.result import CollectiveStat, Straggler
from moesim.results.simulation import GroupRun

RECEIVER_HOT = ("dispatch", "combine_bwd")  # bytes flow towards the experts' rank


def phase_ends(sim: GroupRun) -> np.ndarray:
    """T[p]: when the last rank finished each phase."""
    return np.maximum.accumulate(np.nanmax(sim.trace.end_s, axis=1))


def increments(sim: GroupRun) -> np.ndarray:
    ends = phase_ends(sim)
    return np.diff(ends, prepend=0.0)


def attribute(
    actual: GroupRun, balanced: GroupRun, uncongested: GroupRun
) -> tuple[list[Straggler], list[CollectiveStat]]:
    """Per-phase excesses charged to causes, aggregated per (cause, rank, link)."""
    d_a, d_b, d_u = increments(actual), increments(balanced), increments(uncongested)
    tol = max(1e-7, 1e-4 * float(phase_ends(actual)[-1]))
    events: list[Straggler] = []
    collectives: list[CollectiveStat] = []
    for ph in actual.trace.phases:
        rank = int(np.nanargmax(actual.trace.end_s[ph.index]))
        found = _phase_causes(
            actual, ph, rank, d_a[ph.index] - d_b[ph.index], d_a[ph.index] - d_u[ph.index], tol
        )
        events.extend(found)
        if ph.is_a2a:
            top = max(found, key=lambda s: s.excess_s, default=None)
            collectives.append(
                CollectiveStat(
                    phase=ph.name,
                    layer=ph.layer,
                    time_s=float(d_a[ph.index]),
                    last_rank=rank,
                    cause=top.cause if top else "none",
                    excess_s=top.excess_s if top else 0.0,
                    detail=top.detail if top else "within tolerance of both counterfactuals",
                )
            )
    return _aggregate(events), collectives


def _phase_causes(
    sim: GroupRun, ph: Any, rank: int, excess_bal: float, excess_unc: float, tol: float
) -> list[Straggler]:
    out = []
    if excess_bal > tol:
        cause = _imbalance_or_slow(sim, ph, rank, excess_bal)
        if cause is not None:
            out.append(cause)
    if ph.is_a2a and excess_unc > tol:
        out.append(_congestion(sim, ph, rank, excess_unc))
    return out


def _imbalance_or_slow(sim: GroupRun, ph: Any, rank: int, excess: float) -> Straggler | None:
    if not ph.is_a2a:
        if sim.slowdown[rank] > 1:
            return _slow(sim, rank, excess)
        ratio = _load_ratio(sim, ph.layer, rank)
        if ph.name.startswith("experts") and ratio >= HOT_RATIO:
            return _hot(sim, ph, rank, excess, ratio, "its experts' GEMMs")
        return None
    hot_rank, ratio, what = _hot_side(sim, ph, rank)
    if ratio >= HOT_RATIO:
        return _hot(sim, ph, hot_rank, excess, ratio, what)
    return None


def _hot_side(sim: GroupRun, ph: Any, rank: int) -> tuple[int, float, str]:
    """The rank whose traffic made this all-to-all long, and its byte ratio to the mean."""
    size = sim.trace.a2a[ph.index].size_bytes.copy()
    np.fill_diagonal(size, 0.0)
    if ph.name in RECEIVER_HOT:
        into = size.sum(axis=0)
        return rank, float(into[rank] / max(into.mean(), 1e-30)), "bytes it receives"
    sender = _last_sender(sim, ph, rank)
    out = size.sum(axis=1)
    return sender, float(out[sender] / max(out.mean(), 1e-30)), "bytes it sends back"


def _last_sender(sim: GroupRun, ph: Any, rank: int) -> int:
    flow = _last_flow(sim, ph, rank)
    if flow < 0:
        return rank
    src_gpu = int(sim.net.flows.col["src"][flow])
    return int(np.flatnonzero(sim.gpus == src_gpu)[0])


def _load_ratio(sim: GroupRun, layer: int, rank: int) -> float:
    load = sim.routings[layer].rank_load()
    return float(load[rank] / max(load.mean(), 1e-30))


def _hot(
    sim: GroupRun, ph: Any, rank: int, excess: float, ratio: float, what: str
) -> Straggler:
    routing = sim.routings[ph.layer]
    experts = routing.hot_experts(rank, top=3)
    load = _load_ratio(sim, ph.layer, rank)
    detail = (
        f"rank {rank} ({sim.fabric.gpu_name(int(sim.gpus[rank]))}) hosts hot experts {experts}: "
        f"{load:.2f}x the mean token load per rank ({what}: {ratio:.2f}x the mean)"
    )
    return Straggler(rank=rank, cause="expert_imbalance", excess_s=float(excess), detail=detail)


def _slow(sim: GroupRun, rank: int, excess: float) -> Straggler:
    gpu = sim.fabric.gpu_name(int(sim.gpus[rank]))
    return Straggler(
        rank=rank,
        cause="slow_gpu",
        excess_s=float(excess),
        detail=f"rank {rank} ({gpu}) computes {sim.slowdown[rank]:.2f}x slower than its peers",
    )


def _congestion(sim: GroupRun, ph: Any, rank: int, excess: float) -> Straggler:
    flow = _last_flow(sim, ph, rank)
    link, util = _busiest_link(sim, flow)
    name, tier = sim.fabric.link_name(link), str(sim.fabric.tier[link])
    detail = (
        f"{name} (tier {tier}) was {util:.0%} busy during the last transfer into rank {rank} "
        f"in L{ph.layer}.{ph.name}"
    )
    return Straggler(
        rank=rank, cause="link_congestion", excess_s=float(excess), detail=detail, link=name
    )


def _busiest_link(sim: GroupRun, flow: int) -> tuple[int, float]:
    """The link on ``flow``'s route with the busiest link while it ran (switch links first)."""
    col = sim.net.flows.col
    ptr, length = int(col["pair_ptr"][flow]), int(col["pair_len"][flow])
    links, _ = sim.net.pairs.route(ptr, length)
    util = sim.net.stats.mean_util(links, float(col["start_s"][flow]), float(col["drain_s"][flow]))
    core = np.array([str(sim.fabric.tier[link]) in ("leaf_spine", "spine_core") for link in links])
    pick = np.where(core & (util >= util.max() * 0.9), util + 1.0, util)
    best = int(np.argmax(pick))
    return int(links[best]), float(util[best])


def _aggregate(events: list[Straggler]) -> list[Straggler]:
    """One entry per congested link, and per (cause, rank) otherwise; the worst phase's detail."""
    groups: dict[tuple[str, object], list[Straggler]] = defaultdict(list)
    for ev in events:
        groups[(ev.cause, ev.link if ev.link else ev.rank)].append(ev)
    merged = []
    for (cause, _), evs in groups.items():
        worst = max(evs, key=lambda s: s.excess_s)
        merged.append(
            Straggler(
                rank=worst.rank,
                cause=cause,
                excess_s=sum(s.excess_s for s in evs),
                detail=worst.detail,
                link=worst.link,
                phases=len(evs),
            )
        )
    return sorted(merged, key=lambda s: -s.excess_s)


def _last_flow(sim: GroupRun, ph: Any, rank: int) -> int:
    """Id of the flow whose arrival completed ``rank``'s part of all-to-all ``ph`` (-1: none)."""
    value = sim.trace.a2a[ph.index].received(rank).value
    return int(value) if isinstance(value, int | np.integer) else -1
