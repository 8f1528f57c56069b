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

Everything here reads the run's record (:class:`moesim.results.group_record.GroupEvidence`),
never the simulator's objects, so a saved run attributes as the live one did.
"""

from __future__ import annotations

from collections import defaultdict

import numpy as np

from moesim.calibration.training import HOT_RATIO
from moesim.results.group_record import GroupEvidence
from moesim.results.result import CollectiveStat, Straggler

RECEIVER_HOT = ("dispatch", "combine_bwd")  # bytes flow towards the experts' rank
CORE_TIERS = ("leaf_spine", "spine_core")  # switch-to-switch links, preferred when as busy


def phase_ends(end_s: np.ndarray) -> np.ndarray:
    """T[p]: when the last rank finished each phase, from [phase, rank] finish times."""
    return np.maximum.accumulate(np.nanmax(end_s, axis=1))


def attribute(ev: GroupEvidence) -> tuple[list[Straggler], list[CollectiveStat]]:
    """Per-phase excesses charged to causes, aggregated per (cause, rank, link)."""
    ends = phase_ends(ev.end_s)
    d_a = np.diff(ends, prepend=0.0)
    d_b = np.diff(ev.balanced_ends_s, prepend=0.0)
    d_u = np.diff(ev.uncongested_ends_s, prepend=0.0)
    tol = max(1e-7, 1e-4 * float(ends[-1]))
    events: list[Straggler] = []
    collectives: list[CollectiveStat] = []
    for p in range(len(ev.phase)):
        rank = int(np.nanargmax(ev.end_s[p]))
        found = _phase_causes(ev, p, rank, d_a[p] - d_b[p], d_a[p] - d_u[p], tol)
        events.extend(found)
        if ev.is_a2a[p]:
            top = max(found, key=lambda s: s.excess_s, default=None)
            collectives.append(
                CollectiveStat(
                    phase=ev.phase[p],
                    layer=int(ev.layer[p]),
                    time_s=float(d_a[p]),
                    last_rank=rank,
                    cause=top.cause if top else "none",
                    excess_s=top.excess_s if top else 0.0,
                    detail=top.detail if top else "within tolerance of both counterfactuals",
                )
            )
    return _aggregate(events), collectives


def _phase_causes(
    ev: GroupEvidence, p: int, rank: int, excess_bal: float, excess_unc: float, tol: float
) -> list[Straggler]:
    out = []
    if excess_bal > tol:
        cause = _imbalance_or_slow(ev, p, rank, excess_bal)
        if cause is not None:
            out.append(cause)
    if ev.is_a2a[p] and excess_unc > tol:
        out.append(_congestion(ev, p, rank, excess_unc))
    return out


def _imbalance_or_slow(ev: GroupEvidence, p: int, rank: int, excess: float) -> Straggler | None:
    if not ev.is_a2a[p]:
        if ev.slowdown[rank] > 1:
            return _slow(ev, rank, excess)
        ratio = _load_ratio(ev, int(ev.layer[p]), rank)
        if ev.phase[p].startswith("experts") and ratio >= HOT_RATIO:
            return _hot(ev, p, rank, excess, ratio, "its experts' GEMMs")
        return None
    hot_rank, ratio, what = _hot_side(ev, p, rank)
    if ratio >= HOT_RATIO:
        return _hot(ev, p, hot_rank, excess, ratio, what)
    return None


def _hot_side(ev: GroupEvidence, p: int, rank: int) -> tuple[int, float, str]:
    """The rank whose traffic made this all-to-all long, and its byte ratio to the mean."""
    if ev.phase[p] in RECEIVER_HOT:
        into = ev.into_bytes[p]
        return rank, float(into[rank] / max(into.mean(), 1e-30)), "bytes it receives"
    sender = int(ev.last_sender[p, rank])
    out = ev.out_bytes[p]
    return sender, float(out[sender] / max(out.mean(), 1e-30)), "bytes it sends back"


def _load_ratio(ev: GroupEvidence, layer: int, rank: int) -> float:
    load = ev.rank_load[layer]
    return float(load[rank] / max(load.mean(), 1e-30))


def _hot(
    ev: GroupEvidence, p: int, rank: int, excess: float, ratio: float, what: str
) -> Straggler:
    layer = int(ev.layer[p])
    experts = [int(e) for e in ev.hot_experts[layer, rank] if e >= 0]
    load = _load_ratio(ev, layer, rank)
    detail = (
        f"rank {rank} ({ev.gpu[rank]}) hosts hot experts {experts}: "
        f"{load:.2f}x the mean token load per rank ({what}: {ratio:.2f}x the mean)"
    )
    return Straggler(rank=rank, cause="expert_imbalance", excess_s=float(excess), detail=detail)


def _slow(ev: GroupEvidence, rank: int, excess: float) -> Straggler:
    return Straggler(
        rank=rank,
        cause="slow_gpu",
        excess_s=float(excess),
        detail=f"rank {rank} ({ev.gpu[rank]}) computes {ev.slowdown[rank]:.2f}x slower than "
        "its peers",
    )


def _congestion(ev: GroupEvidence, p: int, rank: int, excess: float) -> Straggler:
    link, util = _busiest_link(ev, p)
    name, tier = ev.link_names[link], ev.link_tiers[link]
    detail = (
        f"{name} (tier {tier}) was {util:.0%} busy during the last transfer into rank {rank} "
        f"in L{int(ev.layer[p])}.{ev.phase[p]}"
    )
    return Straggler(
        rank=rank, cause="link_congestion", excess_s=float(excess), detail=detail, link=name
    )


def _busiest_link(ev: GroupEvidence, p: int) -> tuple[int, float]:
    """The busiest link on the route of the last flow into phase ``p``'s last rank while it
    ran (switch links first, when within 10 % of the busiest): its row in the link table and
    its utilisation."""
    keep = ev.last_links[p] >= 0
    links, util = ev.last_links[p][keep], ev.last_util[p][keep]
    core = np.array([ev.link_tiers[link] in CORE_TIERS for link in links])
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
