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
"""A pass works on the links its unfrozen flows cross only (renumbered) when the working set
has more links than this x their route entries (hops x flows): the per-link arrays then cost
more than the renumbering. Captured solves: cut1024's (8,256 links, median 77 flows) 0.67-0.74x
solver time, step256's (1,680 links, up to ~4,000 flows; later passes have few) 0.85-0.94x."""

LONG_ROUTES = 16
"""Above this many hops (flows standing for many copies, :mod:`moesim.engine.copies`)
:func:`link_sum` sums by (hop, link) keys instead of hop by hop and :func:`_first_on` finds
each column's first row in one pass: the same answers, bit for bit; only faster."""


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


def solve(links: np.ndarray, weights: np.ndarray | None, cap_Bps: np.ndarray,
          link_weight: np.ndarray | None = None) -> Allocation:
    """:func:`max_min_rates`; ``weights=None`` means weight 1 on every real hop (faster).
    ``link_weight``: ``link_sum(links, weights, None, pad)`` if the caller has it (read only).

    The per-link arrays cover only the links the unfrozen flows cross once those are few
    (:data:`COMPACT_BELOW`, :func:`_renumber`): links keep their order, so each link's sums
    add the same terms in the same order, and the answer is bit for bit that of the whole
    fabric."""
    if weights is None:
        return _solve_unit(links, cap_Bps, link_weight)
    n_flows = links.shape[1]
    pad = cap_Bps.shape[0]
    rate = np.full(n_flows, np.inf)
    bneck = np.full(n_flows, -1, dtype=np.int64)
    load = np.zeros(pad + 1)  # per fabric link: a link leaves the working set with its load
    fabric_id = np.arange(pad + 1)  # working link -> fabric link (the last: the padding link)
    cap = np.append(cap_Bps, np.inf)
    weight_left = (link_sum(links, weights, None, pad) if link_weight is None
                   else link_weight.copy())
    weight_left[pad] = 0.0
    used = np.zeros(pad + 1)
    ids = np.arange(n_flows)
    lk, wt = links, weights
    passes = 0
    while ids.size:
        if COMPACT_BELOW * lk.size < fabric_id.size - 1:
            load[fabric_id] = used
            lk, kept = _renumber(lk, fabric_id.size)
            fabric_id, cap, weight_left, used = (fabric_id[kept], cap[kept], weight_left[kept],
                                                 used[kept])
        passes += 1
        w_pad = fabric_id.size - 1  # the padding link's working id
        idle = weight_left <= 0  # idle links: level infinite (no division, no errstate)
        level = np.subtract(cap, used)
        np.divide(np.maximum(level, 0.0, out=level), weight_left, out=level, where=~idle)
        level[idle] = np.inf
        pair_level = level.take(lk)
        flow_min = np.minimum.reduce(pair_level, axis=0)  # ndarray.min without its wrapper
        lower = pair_level > flow_min * (1.0 + LEVEL_RTOL)
        blocked = idle.copy()
        blocked[lk[lower]] = True
        free = ~blocked
        first = _first_on(lk, free.take(lk))
        done = (first >= 0).nonzero()[0]  # nonzero()[0], not flatnonzero: fewer wrapper calls
        if not done.size:  # only flows without real links remain
            break
        if done.size == ids.size:
            rate[ids], bneck[ids] = flow_min, fabric_id[first]
            used += link_sum(lk, wt, flow_min, w_pad)
            break
        level_done, at = flow_min[done], ids[done]
        rate[at], bneck[at] = level_done, fabric_id[first[done]]
        dl = lk.take(done, axis=1)
        dw = None if wt is None else wt.take(done, axis=1)
        used += link_sum(dl, dw, level_done, w_pad)
        weight_left -= link_sum(dl, dw, None, w_pad)
        weight_left[free] = 0.0
        keep = (first < 0).nonzero()[0]
        ids, lk = ids[keep], lk.take(keep, axis=1)
        wt = None if wt is None else wt.take(keep, axis=1)
    load[fabric_id] = used
    return Allocation(rate_Bps=rate, bottleneck_link=bneck, passes=passes, load_Bps=load[:pad])


def _solve_unit(links: np.ndarray, cap_Bps: np.ndarray, link_weight: np.ndarray | None
                ) -> Allocation:
    """:func:`solve` with weight 1 on every real hop, bit for bit, in fewer and smaller numpy
    operations per pass. ``count[l]``, the unfrozen flows crossing ``l``, is exact in floats,
    so a link an unfrozen flow crosses is never idle and a free link's count falls to exactly 0
    in its pass (every flow on it freezes there): no idle mask, no reset of free links. Links
    no unfrozen flow crosses get any level (inf or nan, warnings off): no flow reads it; the
    padding link keeps level inf and stays blocked. Blocked links come from one bincount of
    the pairs below their flow's minimum; each frozen flow's first free link is looked up
    among the frozen flows only."""
    n_flows = links.shape[1]
    pad = cap_Bps.shape[0]
    rate = np.full(n_flows, np.inf)
    bneck = np.full(n_flows, -1, dtype=np.int64)
    load = np.zeros(pad + 1)
    fabric_id = np.arange(pad + 1)
    cap = np.append(cap_Bps, np.inf)
    count = (np.bincount(links.ravel(), minlength=pad + 1).astype(np.float64)
             if link_weight is None else link_weight.copy())
    count[pad] = 0.0
    used = np.zeros(pad + 1)
    ids, lk = np.arange(n_flows), links
    passes = 0
    with np.errstate(divide="ignore", invalid="ignore"):
        while ids.size:
            if COMPACT_BELOW * lk.size < fabric_id.size - 1:
                load[fabric_id] = used
                lk, kept = _renumber(lk, fabric_id.size)
                fabric_id, cap, count, used = fabric_id[kept], cap[kept], count[kept], used[kept]
            passes += 1
            level = np.subtract(cap, used)
            np.maximum(level, 0.0, out=level)
            np.divide(level, count, out=level)
            level[-1] = np.inf
            pair_level = level.take(lk)
            flow_min = np.minimum.reduce(pair_level, axis=0)
            lower = pair_level > flow_min * (1.0 + LEVEL_RTOL)
            blocked = np.bincount(lk.ravel(), weights=lower.ravel(), minlength=fabric_id.size) > 0
            blocked[-1] = True
            off = blocked.take(lk)
            stuck = np.logical_and.reduce(off, axis=0)  # no free link: not frozen this pass
            done = (~stuck).nonzero()[0]
            if not done.size:  # only flows without real links remain
                break
            every = done.size == ids.size
            dl = lk if every else lk.take(done, axis=1)
            level_done, at = flow_min[done], ids[done]
            rate[at] = level_done
            bneck[at] = fabric_id[_first_free(dl, off if every else off.take(done, axis=1))]
            used += link_sum(dl, None, level_done, fabric_id.size - 1)
            if every:
                break
            count -= np.bincount(dl.ravel(), minlength=fabric_id.size)
            keep = stuck.nonzero()[0]
            ids, lk = ids[keep], lk.take(keep, axis=1)
    load[fabric_id] = used
    return Allocation(rate_Bps=rate, bottleneck_link=bneck, passes=passes, load_Bps=load[:pad])


def _first_free(links: np.ndarray, off: np.ndarray) -> np.ndarray:
    """Per column, the link of the first row where ``off`` is false (there is one)."""
    if links.shape[0] > LONG_ROUTES:
        return _first_on(links, ~off)
    first = links[-1]
    for hop in range(links.shape[0] - 2, -1, -1):
        first = np.where(off[hop], first, links[hop])
    return first


def _renumber(links: np.ndarray, n_ids: int) -> tuple[np.ndarray, np.ndarray]:
    """``links`` (ids below ``n_ids``, the last the padding link) renumbered over the ids they
    use, in order, the padding link kept last; and those ids (new id -> old id)."""
    crossed = np.zeros(n_ids, dtype=bool)
    crossed[links] = True
    crossed[n_ids - 1] = True
    kept = crossed.nonzero()[0]
    new_id = np.empty(n_ids, dtype=np.int64)
    new_id[kept] = np.arange(kept.size)
    return new_id[links], kept


def _first_on(links: np.ndarray, on: np.ndarray) -> np.ndarray:
    """Per column, the link of the first row where ``on`` holds, else -1."""
    if links.shape[0] > LONG_ROUTES:  # one pass over the rows, not one np.where per row
        row, col = on.argmax(axis=0), np.arange(links.shape[1])
        return np.where(on[row, col], links[row, col], -1)
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
    if links.shape[0] > LONG_ROUTES:
        return _long_link_sum(links, weights, per_flow, pad)
    total = None  # the first hop's sums start the total (0.0 + x is x: the same sums)
    for hop in range(links.shape[0]):
        values = per_flow if weights is None else weights[hop] * per_flow
        sums = np.bincount(links[hop], weights=values, minlength=pad + 1)
        if total is None:
            total = sums
        else:
            total += sums
    return np.zeros(pad + 1) if total is None else total


def _long_link_sum(links: np.ndarray, weights: np.ndarray | None, per_flow: np.ndarray,
                   pad: int) -> np.ndarray:
    """:func:`link_sum` with ``per_flow`` over many hops (long routes: flows standing for
    many copies, :mod:`moesim.engine.copies`), bit for bit: the loop adds, per link, each
    hop's partial sum (its flows' terms in flow order) to the total, hop by hop; here one
    bincount makes every (hop, link) partial in the same order (the matrix read hop by hop)
    and a second adds them per link in hop order (the keys sorted). The loop's cost is
    hops x links (a ``minlength`` array per hop), this one's the route entries'."""
    hops, n = links.shape
    values = (np.broadcast_to(per_flow, links.shape) if weights is None
              else weights * per_flow).ravel()
    flat = links.ravel()
    real = (flat < pad).nonzero()[0]  # the padding link apart: most entries of long routes
    cells, at = np.unique(real // n * pad + flat[real], return_inverse=True)
    partial = np.bincount(at, weights=values[real], minlength=cells.size)
    total = np.bincount(cells % pad, weights=partial, minlength=pad + 1)
    rest = (flat >= pad).nonzero()[0]
    per_hop = np.bincount(rest // n, weights=values[rest], minlength=hops)
    total[pad] = np.bincount(np.zeros(hops, dtype=np.int64), weights=per_hop)[0]
    return total
