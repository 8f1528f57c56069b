"""Finish batching: which drains one rate solve covers (``batch_window_rel`` = eps).

After a solve, flow i would drain at ``t_i = now + rem_i / rate_i`` under the current rates.
With eps = 0 the next batch is the first drain (and any within float round-off of it): the
exact fluid model. With eps > 0 the batch is the longest prefix of drains, in time order,
such that the batch ends no later than ``t_i + WINDOW_PER_EPS x eps x age_i`` for each flow
i in it, where ``age_i = t_i - young_i`` and ``young_i`` is the latest start of any flow
that has used one of i's links. Each flow in the batch finishes at its own ``t_i``; the
capacity it frees is handed out only at the batch's end, at most that late.

Measuring age from the latest start on a flow's links, not from the oldest flow anywhere,
keeps a collective that starts next to long-running flows from inheriting their long
windows. What eps buys in accuracy is an empirical matter; see :mod:`moesim.engine.network`.
"""

from __future__ import annotations

import numpy as np

TIME_RTOL = 1e-12
"""Drains within this relative distance of the first one are the same instant."""

WINDOW_PER_EPS = 0.5
"""Window = this x eps x age. With windows of a full eps x age, group completion errors of
up to 1.6 eps were measured on random 16-GPU all-to-alls; with half, at most 0.8 eps (240
random cases, eps 0.005-0.2), which leaves the tested bound (error <= eps) a margin."""


def batch_cut(
    now_s: float,
    left_s: np.ndarray,
    start_s: np.ndarray,
    links: np.ndarray,
    young_s: np.ndarray,
    eps: float,
) -> float:
    """Time from ``now_s`` to the end of the next batch: flows with ``left_s`` up to it drain.

    ``links`` are the active flows' padded routes (hops x flows) and ``young_s[l]`` the latest
    start of a flow on link ``l`` (``-inf`` on the padding link).
    """
    first = float(left_s.min())
    cut = first * (1.0 + TIME_RTOL)
    if eps <= 0:
        return cut
    eps *= WINDOW_PER_EPS
    # young_i >= start_i >= min(start), so no batch reaches past this bound.
    bound = first + eps * (now_s + first - float(start_s.min()))
    cand = (left_s <= bound).nonzero()[0]
    cand = cand[np.argsort(left_s[cand], kind="stable")]
    left = left_s[cand]
    young = np.maximum.reduce(young_s.take(links.take(cand, axis=1)), axis=0)
    latest_end = np.minimum.accumulate(left + eps * np.maximum(now_s + left - young, 0.0))
    last = int((left <= latest_end).nonzero()[0][-1])
    return max(cut, float(left[last]))
