"""Solver routes of the flows that join the active set, remembered per set of routes.

Flows join in the chunks they were queued in (a start's flows, solo flows joining, a send).
A chunk's solver routes (:meth:`moesim.engine.active.ActiveFlows.solver_routes`) depend on its
flows' routes only, which their pair pointers name (the pair store is append-only), and the
same chunks recur: a rank's all-to-all layer after layer, a ring's sends. So they are made
once per chunk of pointers; a join puts its chunks' routes side by side, padded to the same
rows, which are the solver routes of all its flows made at once (the same arrays).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from moesim.engine.active import ActiveFlows
from moesim.engine.flowtable import Columns

JOIN_MEMO = 8192
"""Chunks whose solver routes are kept; past it the memo starts afresh."""

STACK_MOST = 16
"""Joins of more chunks than this (solo flows joining one by one) make their routes at once."""

Pairs = Callable[[np.ndarray], tuple[np.ndarray, np.ndarray, np.ndarray]]
Routes = tuple[np.ndarray, np.ndarray | None, np.ndarray]


class JoinRoutes:
    """(solver links, solver weights or None, every hop's link) of joining flows."""

    def __init__(self, active: ActiveFlows, flows: Columns, pairs: Pairs) -> None:
        self.active = active
        self.flows = flows
        self.pairs = pairs  # FlowNetwork._pairs: (link, weight, owner) of every hop
        self._memo: dict[bytes, Routes] = {}

    def of(self, chunks: list[np.ndarray], new: np.ndarray) -> Routes:
        """Routes of the flows ``new`` (the ``chunks`` end to end)."""
        if len(chunks) > STACK_MOST:
            return self._made(new)
        parts = [self._chunk(c) for c in chunks]
        if len(parts) == 1:
            return parts[0]
        pad = self.active.pad
        links = np.full((max(p[0].shape[0] for p in parts), new.size), pad, dtype=np.int64)
        weighted = any(p[1] is not None for p in parts)
        wts = np.zeros(links.shape) if weighted else None
        lo = 0
        for part_links, part_wts, _ in parts:
            hops, hi = part_links.shape[0], lo + part_links.shape[1]
            links[:hops, lo:hi] = part_links
            if wts is not None:
                wts[:hops, lo:hi] = part_links != pad if part_wts is None else part_wts
            lo = hi
        return links, wts, np.concatenate([p[2] for p in parts])

    def _chunk(self, ids: np.ndarray) -> Routes:
        key = self.flows.col["pair_ptr"][ids].tobytes()
        known = self._memo.get(key)
        if known is None:
            if len(self._memo) >= JOIN_MEMO:
                self._memo.clear()
            known = self._memo[key] = self._made(ids)
        return known

    def _made(self, ids: np.ndarray) -> Routes:
        link, wt, col = self.pairs(ids)
        lens = self.flows.col["pair_len"][ids]
        row = np.arange(link.size) - np.repeat(np.cumsum(lens) - lens, lens)
        links = np.full((int(lens.max()), ids.size), self.active.pad, dtype=np.int64)
        wts = np.zeros(links.shape)
        links[row, col], wts[row, col] = link, wt
        return (*self.active.solver_routes(links, wts), link.copy())
