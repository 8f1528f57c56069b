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
short ones.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

LEVEL_RTOL = 1e-9
"""Levels within this relative distance count as equal (one freezing pass)."""


@dataclass(frozen=True)
class Allocation:
    """Rates of one solve: ``rate_Bps[f]``, the link that froze each flow, passes used."""

    rate_Bps: np.ndarray
    bottleneck_link: np.ndarray
    passes: int


def max_min_rates(links: np.ndarray, weights: np.ndarray, cap_Bps: np.ndarray) -> Allocation:
    """Max-min fair rates of the flows whose padded routes are the columns of ``links``.

    A flow that crosses no real link gets an infinite rate.

    >>> import numpy as np
    >>> a = max_min_rates(np.array([[0, 0]]), np.ones((1, 2)), np.array([10.0]))
    >>> a.rate_Bps.tolist()
    [5.0, 5.0]
    """
    n_flows = links.shape[1]
    n_links = cap_Bps.shape[0]
    cap = np.append(cap_Bps, np.inf)
    rate = np.full(n_flows, np.inf)
    bneck = np.full(n_flows, -1, dtype=np.int64)
    weight_left = np.bincount(links.ravel(), weights=weights.ravel(), minlength=n_links + 1)
    weight_left[n_links] = 0.0
    used = np.zeros(n_links + 1)
    ids = np.arange(n_flows)
    lk, wt = links, weights
    passes = 0
    while ids.size:
        passes += 1
        with np.errstate(divide="ignore", invalid="ignore"):
            level = np.maximum(cap - used, 0.0) / weight_left
        level[weight_left <= 0] = np.inf
        pair_level = level[lk]
        flow_min = pair_level.min(axis=0)
        lower = pair_level > flow_min * (1.0 + LEVEL_RTOL)
        blocked = np.bincount(lk[lower], minlength=n_links + 1) > 0
        blocked[weight_left <= 0] = True
        on_min = ~blocked[lk]
        done = on_min.any(axis=0)
        if not done.any():  # only flows without real links remain
            break
        rate[ids[done]] = flow_min[done]
        bneck[ids[done]] = lk[on_min[:, done].argmax(axis=0), np.flatnonzero(done)]
        dl, dw = lk[:, done], wt[:, done]
        used += np.bincount(dl.ravel(), weights=(dw * flow_min[done]).ravel(), minlength=n_links + 1)
        weight_left -= np.bincount(dl.ravel(), weights=dw.ravel(), minlength=n_links + 1)
        weight_left[~blocked] = 0.0
        keep = ~done
        ids, lk, wt = ids[keep], lk[:, keep], wt[:, keep]
    return Allocation(rate_Bps=rate, bottleneck_link=bneck, passes=passes)
