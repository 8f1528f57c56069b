"""A flow alone on an idle network, timed in closed form instead of by the rate solver.

Most point-to-point sends of a pipelined step start on an idle network and drain before the
next flow starts (fast mode at 9,216 GPUs: 839 of 840 pipeline sends). A flow alone gets,
under max-min sharing, the least ``cap / weight`` over its links and drains ``size / rate``
later; :class:`sim.engine.network.FlowNetwork` times it so, charging the link counters as a
solve would, and skips two rate solves. If another flow starts while it runs, it first joins
the active set *as of its own start* (``FlowNetwork._materialize``), and the run goes on as
if it had never been alone. Tested against the solver path in ``tests/test_engine_solo.py``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from sim.engine.maxmin import LEVEL_RTOL


@dataclass(frozen=True)
class Solo:
    """The one flow on the wire: its id, start, rate and what it puts on each link."""

    fid: int
    t0_s: float
    size_bytes: float
    rate_Bps: float
    bottleneck: int  # solver link that sets the rate (as the solver names it)
    hops: np.ndarray  # its links (implied ones included), in route order
    weights: np.ndarray  # weight of each hop
    solver_links: np.ndarray  # its links the solver keeps
    load_Bps: np.ndarray  # per link of the fabric: the load it puts there
    count: np.ndarray  # per link of the fabric: how many of its hops cross it
    token: int  # its wake-up is stale once this changes


def alone(fid: int, t0_s: float, size_bytes: float, hops: np.ndarray, weights: np.ndarray,
          solve_map: np.ndarray, load_of: np.ndarray, cap_Bps: np.ndarray,
          token: int) -> Solo:
    """The rates the solver would give flow ``fid`` alone (``solve_map`` / ``load_of`` as
    :class:`sim.engine.network.FlowNetwork` keeps them: implied links dropped, then charged
    their partner's load)."""
    pad = cap_Bps.shape[0]
    mapped = solve_map[hops]
    kept = mapped < pad
    links, wts = mapped[kept], weights[kept]
    uniq, inv = np.unique(links, return_inverse=True)
    level = cap_Bps[uniq] / np.bincount(inv, weights=wts)
    rate = float(level.min())
    on_min = level[inv] <= rate * (1.0 + LEVEL_RTOL)
    solver_load = np.zeros(pad)
    np.add.at(solver_load, links, wts * rate)
    return Solo(fid=fid, t0_s=t0_s, size_bytes=size_bytes, rate_Bps=rate,
                bottleneck=int(links[int(np.argmax(on_min))]), hops=hops, weights=weights,
                solver_links=links, load_Bps=solver_load[load_of],
                count=np.bincount(hops, minlength=pad), token=token)


def moved_bytes(solo: Solo, dt_s: float) -> tuple[np.ndarray, float]:
    """(bytes per link, bytes left) after ``dt_s`` at its rate: the solver path's
    ``FlowNetwork._advance`` for one flow, a drain's float overshoot taken back per hop."""
    full = solo.rate_Bps * dt_s
    moved = solo.load_Bps * dt_s
    if full > solo.size_bytes:
        excess = (full - solo.size_bytes) * solo.weights
        moved = moved - np.bincount(solo.hops, weights=excess, minlength=moved.size)
    return moved, max(solo.size_bytes - full, 0.0)
