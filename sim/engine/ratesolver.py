"""Max-min rates of the active flows, re-solving only the flows a change can reach.

Progressive filling freezes flows in order of rising level. When flows leave, every link
they crossed had a level at least their rate, so until the water reaches ``t_rem`` (the
smallest rate among them) nothing freezes differently. When flows arrive, a link they cross
saturates at a level of at least ``cap / (total weight on it)`` (frozen flows there have
rates no higher than the level), so nothing freezes differently below ``t_add``, the least
such bound over their links. Hence every flow whose old rate is below
``T = min(t_rem, t_add)`` keeps it, exactly, and the others are the max-min allocation of
the residual capacities ``cap - load(kept flows)`` (no residual link can saturate below
``T``, so filling them from zero or from ``T`` is the same). Only those flows are re-solved.

Loads are carried from solve to solve by subtraction, so a full solve runs whenever more
than half of the flows would be re-solved, and after ``FULL_EVERY`` incremental solves,
which bounds the float drift.
"""

from __future__ import annotations

import numpy as np

from moesim.engine.maxmin import Allocation, link_sum, solve

KEEP_RTOL = 1e-6
"""A flow keeps its rate if it is below ``T x (1 - KEEP_RTOL)`` (a margin over the solver's
level tolerance, so flows tied with ``T`` are re-solved)."""

FULL_EVERY = 64


class RateSolver:
    """Solves the active flows' rates; :meth:`leave` and :meth:`enter` report changes."""

    def __init__(self, cap_Bps: np.ndarray, incremental: bool = True) -> None:
        self.cap = cap_Bps
        self.pad = cap_Bps.shape[0]
        self.incremental = incremental
        self.load = np.zeros(self.pad)  # per link, load of the current allocation
        self._weight = np.zeros(self.pad + 1)  # per link, total weight of active flows
        self._t_rem = np.inf
        self._touched = np.zeros(self.pad + 1, dtype=bool)  # links new flows cross
        self._any_touched = False
        self._since_full = 0
        self.full_solves = 0

    def leave(self, links: np.ndarray, wts: np.ndarray | None, rate: np.ndarray) -> None:
        """Flows with these solver routes and (current) rates leave."""
        self._weight -= link_sum(links, wts, None, self.pad)
        self.load -= link_sum(links, wts, rate, self.pad)[: self.pad]
        self._t_rem = min(self._t_rem, float(rate.min(initial=np.inf)))

    def enter(self, links: np.ndarray, wts: np.ndarray | None) -> None:
        """Flows with these solver routes arrive."""
        self._weight += link_sum(links, wts, None, self.pad)
        self._touched[links] = True
        self._any_touched = True

    def solve(
        self, links: np.ndarray, wts: np.ndarray | None, rate: np.ndarray, new_from: int
    ) -> tuple[np.ndarray, Allocation]:
        """Rates after the reported changes: (indices of re-solved flows, their allocation).

        ``links``/``wts``/``rate`` cover every active flow (hops x flows), flows from
        ``new_from`` on having just entered.
        """
        n = links.shape[1]
        limit = min(self._t_rem, self._t_add())
        self._t_rem = np.inf
        if not self.incremental or self._since_full >= FULL_EVERY:
            return self._full(links, wts)
        redo = (~(rate[:new_from] < limit * (1.0 - KEEP_RTOL))).nonzero()[0]
        if 2 * (redo.size + n - new_from) > n:
            return self._full(links, wts)
        old, redo = redo.size, np.concatenate((redo, np.arange(new_from, n)))  # old ones first
        sub_links = links.take(redo, axis=1)
        sub_wts = None if wts is None else wts.take(redo, axis=1)
        kept_load = self.load - link_sum(sub_links[:, :old], None if sub_wts is None
                                         else sub_wts[:, :old], rate[redo[:old]], self.pad)[:-1]
        alloc = solve(sub_links, sub_wts, np.maximum(self.cap - kept_load, 0.0))
        assert alloc.load_Bps is not None
        self.load = kept_load + alloc.load_Bps
        self._since_full += 1
        return redo, alloc

    def _full(self, links: np.ndarray, wts: np.ndarray | None) -> tuple[np.ndarray, Allocation]:
        links = np.ascontiguousarray(links)  # the solver gathers faster from contiguous rows
        wts = None if wts is None else np.ascontiguousarray(wts)
        self._weight = link_sum(links, wts, None, self.pad)
        alloc = solve(links, wts, self.cap, self._weight)  # the sums it starts from
        assert alloc.load_Bps is not None
        self.load = alloc.load_Bps.copy()
        self._weight[self.pad] = 0.0
        self._since_full = 0
        self.full_solves += 1
        return np.arange(links.shape[1]), alloc

    def _t_add(self) -> float:
        if not self._any_touched:
            return np.inf
        touched = self._touched[: self.pad]
        with np.errstate(divide="ignore"):
            t_add = float((self.cap[touched] / self._weight[: self.pad][touched]).min(
                initial=np.inf))
        self._touched[:], self._any_touched = False, False
        return t_add
