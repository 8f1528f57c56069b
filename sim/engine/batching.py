"""Finish batching (experimental rules)."""

from __future__ import annotations

import numpy as np

from sim.engine.maxmin import link_sum

RULE = "age"


def batch_cut(now, left_s, rate, start_s, links, wts, cap, eps, young=None):
    first = float(left_s.min())
    if RULE == "age_link":
        bound = first + eps * (now + first - float(start_s.min()))
        cand = np.flatnonzero(left_s <= bound)
        t = left_s[cand]
        order = np.argsort(t, kind="stable")
        t = t[order]
        yl = young[links.take(cand[order], axis=1)].max(axis=0)
        c = t + eps * np.maximum(now + t - yl, 0.0)
        cm = np.minimum.accumulate(c)
        k = np.flatnonzero(t <= cm)[-1]
        return float(t[k])
    if RULE == "age":
        return first + eps * (now + first - float(start_s.min()))
    if RULE == "age_young":
        return first + eps * (now + first - float(start_s.max()))
    ref = 0.0 if RULE == "idle_now" else now - float(start_s.min())
    pad = cap.shape[0]

    def ok(x):
        sel = np.flatnonzero(left_s <= x)
        lk = links.take(sel, axis=1)
        w = None if wts is None else wts.take(sel, axis=1)
        r = rate[sel]
        idle = link_sum(lk, w, r * (x - left_s[sel]), pad)[:pad]
        return bool(np.all(idle <= eps * cap * (x + ref)))
    lo = first
    hi = None
    step = first * eps
    top = float(left_s.max())
    while True:
        x = min(first + step, top)
        if not ok(x):
            hi = x
            break
        lo = x
        if x >= top:
            return lo
        step *= 2
    for _ in range(8):
        mid = 0.5 * (lo + hi)
        if ok(mid):
            lo = mid
        else:
            hi = mid
    return lo
