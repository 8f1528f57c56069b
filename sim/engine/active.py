"""The flows now on the wire, as compact arrays the solver works on directly.

Only the routes the solver needs are kept here: padded and transposed (hops x flows), padded
with the index ``n_links`` (a virtual link of infinite capacity), implied links dropped.
Weights are kept only while some active flow has a hop of weight other than 1 (sprayed
flows); otherwise ``wts`` is None and the solver takes the faster unit-weight path.

Arrays live in buffers with spare capacity; the public attributes are views of their first
``n`` columns. A finished flow's column is filled by a surviving flow from the end
(swap-remove), so removing k flows costs O(k), not O(active flows); flows that arrive are
appended at the end, after every flow already active.
"""

from __future__ import annotations

import numpy as np

_STATE_ROWS = 5


class _Row:
    """Row ``i`` of the state buffer, first ``n`` columns; assigning writes into it."""

    def __init__(self, i: int) -> None:
        self.i = i

    def __get__(self, obj: ActiveFlows, owner: type | None = None) -> np.ndarray:
        return obj._state[self.i, : obj.n]

    def __set__(self, obj: ActiveFlows, value: np.ndarray | float) -> None:
        obj._state[self.i, : obj.n] = value


class ActiveFlows:
    """Per-active-flow state: id, remaining bytes, rate, planned drain time, solver routes."""

    def __init__(self, n_links: int, solve_map: np.ndarray) -> None:
        self.pad = n_links
        self.solve_map = solve_map  # link -> itself, or pad when implied (pad -> pad)
        self.n = 0
        self._ids = np.zeros(64, dtype=np.int64)
        self._state = np.zeros((_STATE_ROWS, 64))  # rows: see _Row attributes
        self._links = np.full((1, 64), n_links, dtype=np.int64)
        self._wts: np.ndarray | None = None

    rem = _Row(0)  # remaining bytes
    rate = _Row(1)  # B/s
    plan_s = _Row(2)  # planned drain time, NaN if none
    start_s = _Row(3)
    tol = _Row(4)  # bytes left that count as drained (float round-off)

    @property
    def ids(self) -> np.ndarray:
        return self._ids[: self.n]

    @property
    def links(self) -> np.ndarray:
        return self._links[:, : self.n]

    @property
    def wts(self) -> np.ndarray | None:
        return None if self._wts is None else self._wts[:, : self.n]

    def add(
        self, ids: np.ndarray, size: np.ndarray, start_s: np.ndarray, links: np.ndarray,
        wts: np.ndarray, rem: np.ndarray | None = None,
    ) -> tuple[np.ndarray, np.ndarray | None]:
        """Append flows of ``size`` bytes with ``rem`` left (default: all of them);
        ``links``/``wts`` are their full padded routes, hops x flows.

        Returns their solver routes (``None`` weights: all 1)."""
        return self.append(ids, size, start_s, *self.solver_routes(links, wts), rem=rem)

    def solver_routes(self, links: np.ndarray, wts: np.ndarray
                      ) -> tuple[np.ndarray, np.ndarray | None]:
        """The solver routes of full padded routes ``links``/``wts`` (hops x flows): implied
        links dropped, packed to the top rows; weights None when every real hop weighs 1.
        Each column depends on its own route only, and the rows are as many as the longest
        needs (at least 1), so the routes of several sets of flows, padded to the same rows
        and put side by side, are those of all of them at once."""
        links, wts = self._solve_routes(links, wts)
        unit = bool(np.all((wts == 1.0) | (links == self.pad)))
        return links, None if unit else wts

    def append(
        self, ids: np.ndarray, size: np.ndarray, start_s: np.ndarray, links: np.ndarray,
        wts: np.ndarray | None, rem: np.ndarray | None = None,
    ) -> tuple[np.ndarray, np.ndarray | None]:
        """:meth:`add` of flows given their solver routes (:meth:`solver_routes`)."""
        lo, hi = self.n, self.n + ids.size
        self._reserve(hi, links.shape[0], weighted=wts is not None)
        self._ids[lo:hi] = ids
        self._state[:, lo:hi] = (size if rem is None else rem, np.zeros(ids.size),
                                 np.full(ids.size, np.nan), start_s, size * 1e-12)
        self._links[: links.shape[0], lo:hi] = links
        self._links[links.shape[0] :, lo:hi] = self.pad
        if self._wts is not None:
            self._wts[:, lo:hi] = 0.0
            self._wts[: links.shape[0], lo:hi] = links != self.pad if wts is None else wts
        self.n = hi
        return links, wts

    def routes(self, idx: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
        """Solver routes (links, weights or None) of the active flows at positions ``idx``."""
        wts = self.wts
        return self.links.take(idx, axis=1), None if wts is None else wts.take(idx, axis=1)

    def keep(self, mask: np.ndarray) -> None:
        """Keep only the flows where ``mask`` is true (the order of the rest changes)."""
        n_new = int(mask.sum())
        holes = (~mask[:n_new]).nonzero()[0]  # not flatnonzero: fewer wrapper calls
        movers = n_new + mask[n_new:].nonzero()[0]
        if holes.size:
            self._ids[holes] = self._ids[movers]
            self._state[:, holes] = self._state[:, movers]
            self._links[:, holes] = self._links[:, movers]
            if self._wts is not None:
                self._wts[:, holes] = self._wts[:, movers]
        self.n = n_new
        if n_new == 0:
            self._wts = None

    def _reserve(self, need: int, hops: int, weighted: bool) -> None:
        cap = self._ids.size
        new_cap = max(need, 2 * cap) if need > cap else cap
        new_hops = max(hops, self._links.shape[0])
        if new_cap > cap:
            self._ids = np.resize(self._ids, new_cap)
            self._state = _grown(self._state, self._state.shape[0], new_cap, 0.0)
        if (new_hops, new_cap) != self._links.shape:
            self._links = _grown(self._links, new_hops, new_cap, self.pad)
            if self._wts is not None:
                self._wts = _grown(self._wts, new_hops, new_cap, 0.0)
        if weighted and self._wts is None:
            self._wts = (self._links != self.pad).astype(np.float64)

    def _solve_routes(self, links: np.ndarray, wts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Routes without implied links, packed to the top rows."""
        mapped = self.solve_map[links]
        order = np.argsort(mapped == self.pad, axis=0, kind="stable")
        hops = max(int((mapped != self.pad).sum(axis=0).max(initial=0)), 1)
        order = order[:hops]
        packed = np.take_along_axis(mapped, order, axis=0)
        return packed, np.where(packed == self.pad, 0.0, np.take_along_axis(wts, order, axis=0))


def _grown(a: np.ndarray, rows: int, cols: int, fill: float) -> np.ndarray:
    out = np.full((rows, cols), fill, dtype=a.dtype)
    out[: a.shape[0], : a.shape[1]] = a
    return out
