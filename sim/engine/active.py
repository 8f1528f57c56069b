"""The flows now on the wire, as compact arrays the solver works on directly.

Only the routes the solver needs are kept here: padded and transposed (hops x flows), padded
with the index ``n_links`` (a virtual link of infinite capacity), implied links dropped.
Weights are kept only while some active flow has a hop of weight other than 1 (sprayed
flows); otherwise ``wts`` is None and the solver takes the faster unit-weight path.
"""

from __future__ import annotations

import numpy as np


class ActiveFlows:
    """Per-active-flow state: id, remaining bytes, rate, planned drain time, solver routes."""

    def __init__(self, n_links: int, solve_map: np.ndarray) -> None:
        self.pad = n_links
        self.solve_map = solve_map  # link -> itself, or pad when implied (pad -> pad)
        self.ids = np.zeros(0, dtype=np.int64)
        self.rem = np.zeros(0)
        self.rate = np.zeros(0)
        self.plan_s = np.zeros(0)
        self.start_s = np.zeros(0)
        self.tol = np.zeros(0)  # bytes left that count as drained (float round-off)
        self.links = np.zeros((1, 0), dtype=np.int64)
        self.wts: np.ndarray | None = None

    @property
    def n(self) -> int:
        return int(self.ids.size)

    def add(
        self, ids: np.ndarray, size: np.ndarray, start_s: np.ndarray, links: np.ndarray,
        wts: np.ndarray,
    ) -> tuple[np.ndarray, np.ndarray | None]:
        """Append flows; ``links``/``wts`` are their full padded routes, hops x flows.

        Returns their solver routes (``None`` weights: all 1)."""
        links, wts = self._solve_routes(links, wts)
        unit = bool(np.all((wts == 1.0) | (links == self.pad)))
        if self.wts is not None or not unit:
            old = self.wts if self.wts is not None else (self.links != self.pad).astype(float)
            self.wts = _hstack(old, wts, 0.0)
        self.links = _hstack(self.links, links, self.pad)
        self.ids = np.concatenate((self.ids, ids))
        self.rem = np.concatenate((self.rem, size))
        self.rate = np.concatenate((self.rate, np.zeros(ids.size)))
        self.plan_s = np.concatenate((self.plan_s, np.full(ids.size, np.nan)))
        self.start_s = np.concatenate((self.start_s, start_s))
        self.tol = np.concatenate((self.tol, size * 1e-12))
        return links, None if unit else wts

    def routes(self, idx: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
        """Solver routes (links, weights or None) of the active flows at positions ``idx``."""
        return self.links.take(idx, axis=1), None if self.wts is None else self.wts.take(idx, 1)

    def keep(self, mask: np.ndarray) -> None:
        """Keep only the flows where ``mask`` is true."""
        idx = np.flatnonzero(mask)
        self.ids, self.rem, self.rate = self.ids[idx], self.rem[idx], self.rate[idx]
        self.plan_s, self.start_s, self.tol = self.plan_s[idx], self.start_s[idx], self.tol[idx]
        self.links = self.links.take(idx, axis=1)
        if self.wts is not None and idx.size:
            self.wts = self.wts.take(idx, axis=1)
        else:
            self.wts = None

    def _solve_routes(self, links: np.ndarray, wts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Routes without implied links, packed to the top rows."""
        mapped = self.solve_map[links]
        order = np.argsort(mapped == self.pad, axis=0, kind="stable")
        hops = max(int((mapped != self.pad).sum(axis=0).max(initial=0)), 1)
        order = order[:hops]
        packed = np.take_along_axis(mapped, order, axis=0)
        return packed, np.where(packed == self.pad, 0.0, np.take_along_axis(wts, order, axis=0))


def _hstack(a: np.ndarray, b: np.ndarray, fill: float) -> np.ndarray:
    """Columns of ``a`` then ``b``, the shorter padded with ``fill`` rows at the bottom."""
    hops = max(a.shape[0], b.shape[0])
    out = np.full((hops, a.shape[1] + b.shape[1]), fill, dtype=a.dtype)
    out[: a.shape[0], : a.shape[1]] = a
    out[: b.shape[0], a.shape[1] :] = b
    return out
