"""Max-min fair rate allocation by progressive filling (water-filling).

Flows cross links; a flow may cross a link with a weight w in (0, 1] (a sprayed
flow puts a fraction of its bytes on each of several paths). Every flow gets
the largest rate such that no link carries more than its capacity and no flow
can gain without taking from a flow whose rate is already no larger
(max-min fairness).

Progressive filling raises all unfrozen flows together; a link saturates at
its *level* = residual capacity / (sum of unfrozen weights), and the flows
crossing it freeze there. Done one level at a time this needs as many passes as
there are distinct bottleneck levels (hundreds in a skewed all-to-all). This
solver freezes, in one pass, every link whose level is no higher than the
level of any link it shares an unfrozen flow with (a *local* minimum). That is
exact: freezing flows at a lower level only raises the level of the links they
leave, so nothing can freeze a local minimum's flows before the water reaches
its level. Passes = depth of the bottleneck dependency chain, each a few numpy
operations over the still-unfrozen flows.

Routes come padded and transposed: column f of ``links`` (shape hops x flows)
lists flow f's links, padded with the index ``n_links`` (a virtual link of
infinite capacity); ``weights`` holds their weights (0 on padding). Reductions
then run across a few long rows, which numpy does far faster than along many
short ones. :func:`solve` also takes ``weights=None`` (every real hop weighs 1,
as with ECMP and D-mod-K), which skips the weight arrays. Subsets are taken with
index arrays (``take``), never boolean masks along the flow axis (several times
slower in numpy, and non-contiguous). One pass over 65k flows x 4 hops costs
about 5-10 ms on a laptop-class core.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

LEVEL_RTOL = 1e-9
"""Levels within this relative distance count as equal (one freezing pass)."""

COMPACT_BELOW = 0.5
"""Solve on the crossed links only when the fabric has more links than this x the route
entries (hops x flows): the per-link arrays then cost more than the renumbering (cut1024's
solves, 8,256 links: 0.63-0.79x solver time; step256's 2,000-flow solves: 1.07x if compacted)."""


@dataclass(frozen=True)
class Allocation:
    """Rates of one solve: ``rate_Bps[f]``, the link that froze each flow, passes used, and
    the load ``load_Bps[l]`` (sum over flows of weight x rate) it puts on each link."""

    rate_Bps: np.ndarray
    bottleneck_link: np.ndarray
    passes: int
    load_Bps: np.ndarray | None = None


def max_min_rates(links: np.ndarray, weights: np.ndarray, cap_Bps: np.ndarray) -> Allocation:
    """Max-min fair rates of the flows whose padded routes are the columns of ``links``.

    A flow that crosses no real link gets an infinite rate.

    >>> import numpy as np
    >>> a = max_min_rates(np.array([[0, 0]]), np.ones((1, 2)), np.array([10.0]))
    >>> a.rate_Bps.tolist()
    [5.0, 5.0]
    """
    return solve(links, weights, cap_Bps)


def solve(links: np.ndarray, weights: np.ndarray | None, cap_Bps: np.ndarray) -> Allocation:
    """:func:`max_min_rates`; ``weights=None`` means weight 1 on every real hop (faster).

    A few flows on a large fabric are solved on the links they cross only
    (:func:`_solve_compact`)."""
    if COMPACT_BELOW * links.size < cap_Bps.shape[0]:
        return _solve_compact(links, weights, cap_Bps)
    return _solve(links, weights, cap_Bps)


def _solve_compact(links: np.ndarray, weights: np.ndarray | None, cap_Bps: np.ndarray
                   ) -> Allocation:
    """:func:`_solve` on the links the flows cross, renumbered in their order: every
    per-link array shrinks to them, and each link's sums add the same terms in the same
    order, so the answer is bit for bit that of the whole fabric."""
    pad = cap_Bps.shape[0]
    crossed = np.zeros(pad + 1, dtype=bool)
    crossed[links] = True
    crossed[pad] = True  # the padding link stays the last one
    old_id = crossed.nonzero()[0]
    new_id = np.empty(pad + 1, dtype=np.int64)
    new_id[old_id] = np.arange(old_id.size)
    alloc = _solve(new_id[links], weights, cap_Bps[old_id[:-1]])
    assert alloc.load_Bps is not None
    bneck = np.where(alloc.bottleneck_link >= 0, old_id[alloc.bottleneck_link], -1)
    load = np.zeros(pad)
    load[old_id[:-1]] = alloc.load_Bps
    return Allocation(rate_Bps=alloc.rate_Bps, bottleneck_link=bneck, passes=alloc.passes,
                      load_Bps=load)


def _solve(links: np.ndarray, weights: np.ndarray | None, cap_Bps: np.ndarray) -> Allocation:
    n_flows = links.shape[1]
    pad = cap_Bps.shape[0]
    cap = np.append(cap_Bps, np.inf)
    rate = np.full(n_flows, np.inf)
    bneck = np.full(n_flows, -1, dtype=np.int64)
    weight_left = link_sum(links, weights, None, pad)
    weight_left[pad] = 0.0
    used = np.zeros(pad + 1)
    ids = np.arange(n_flows)
    lk, wt = links, weights
    passes = 0
    level = np.empty(pad + 1)
    while ids.size:
        passes += 1
        idle = weight_left <= 0  # idle links: level infinite (no division, no errstate)
        level.fill(np.inf)
        np.divide(np.maximum(cap - used, 0.0), weight_left, out=level, where=~idle)
        pair_level = level[lk]
        flow_min = pair_level.min(axis=0)
        lower = pair_level > flow_min * (1.0 + LEVEL_RTOL)
        blocked = np.bincount(np.where(lower, lk, pad).ravel(), minlength=pad + 1) > 0
        blocked |= idle
        on_min = ~blocked[lk]
        first = _first_on(lk, on_min)
        is_done = first >= 0
        done = is_done.nonzero()[0]  # nonzero()[0], not flatnonzero: fewer wrapper calls
        if not done.size:  # only flows without real links remain
            break
        if done.size == ids.size:
            rate[ids], bneck[ids] = flow_min, first
            used += link_sum(lk, wt, flow_min, pad)
            break
        level_done = flow_min[done]
        rate[ids[done]], bneck[ids[done]] = level_done, first[done]
        dl = lk.take(done, axis=1)
        dw = None if wt is None else wt.take(done, axis=1)
        used += link_sum(dl, dw, level_done, pad)
        weight_left -= link_sum(dl, dw, None, pad)
        weight_left[~blocked] = 0.0
        keep = (~is_done).nonzero()[0]
        ids, lk = ids[keep], lk.take(keep, axis=1)
        wt = None if wt is None else wt.take(keep, axis=1)
    return Allocation(rate_Bps=rate, bottleneck_link=bneck, passes=passes, load_Bps=used[:pad])


def _first_on(links: np.ndarray, on: np.ndarray) -> np.ndarray:
    """Per column, the link of the first row where ``on`` holds, else -1."""
    first = np.where(on[-1], links[-1], -1)
    for hop in range(links.shape[0] - 2, -1, -1):
        first = np.where(on[hop], links[hop], first)
    return first


def link_sum(
    links: np.ndarray, weights: np.ndarray | None, per_flow: np.ndarray | None, pad: int
) -> np.ndarray:
    """Per link (and the pad), the sum over hops of weight x ``per_flow`` (1 when None)."""
    if per_flow is None:
        if weights is None:
            return np.bincount(links.ravel(), minlength=pad + 1).astype(np.float64)
        return np.bincount(links.ravel(), weights=weights.ravel(), minlength=pad + 1)
    total = np.zeros(pad + 1)
    for hop in range(links.shape[0]):
        values = per_flow if weights is None else weights[hop] * per_flow
        total += np.bincount(links[hop], weights=values, minlength=pad + 1)
    return total
