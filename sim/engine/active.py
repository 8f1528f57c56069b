"""The flows now on the wire, as compact arrays the solver works on directly.

Routes are kept padded and transposed (hops x flows), padded with the index
``n_links`` (a virtual link of infinite capacity), once with every link (for
link statistics) and once without implied links (for the rate solve).
"""

from __future__ import annotations

import numpy as np


class ActiveFlows:
    """Per-active-flow state: id, remaining bytes, rate, planned drain time, routes."""

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
        self.wts = np.zeros((1, 0))
        self.slinks = np.zeros((1, 0), dtype=np.int64)
        self.swts = np.zeros((1, 0))

    @property
    def n(self) -> int:
        return int(self.ids.size)

    def add(self, ids: np.ndarray, size: np.ndarray, start_s: np.ndarray, links: np.ndarray, wts: np.ndarray) -> None:
        """Append flows; ``links``/``wts`` are their padded routes, hops x flows."""
        slinks, swts = self._solve_routes(links, wts)
        self.links, self.wts = self._stack(self.links, links, self.wts, wts)
        self.slinks, self.swts = self._stack(self.slinks, slinks, self.swts, swts)
        self.ids = np.concatenate((self.ids, ids))
        self.rem = np.concatenate((self.rem, size))
        self.rate = np.concatenate((self.rate, np.zeros(ids.size)))
        self.plan_s = np.concatenate((self.plan_s, np.full(ids.size, np.nan)))
        self.start_s = np.concatenate((self.start_s, start_s))
        self.tol = np.concatenate((self.tol, size * 1e-12))

    def keep(self, mask: np.ndarray) -> None:
        """Keep only the flows where ``mask`` is true."""
        idx = np.flatnonzero(mask)
        for name in ("ids", "rem", "rate", "plan_s", "start_s", "tol"):
            setattr(self, name, getattr(self, name).take(idx))
        for name in ("links", "wts", "slinks", "swts"):
            setattr(self, name, getattr(self, name).take(idx, axis=1))

    def link_sum(self, per_flow: np.ndarray) -> np.ndarray:
        """Per link, the sum over its flows of weight x ``per_flow``."""
        total = np.bincount(self.links.ravel(), weights=(self.wts * per_flow).ravel(), minlength=self.pad + 1)
        return total[: self.pad]

    def link_count(self) -> np.ndarray:
        return np.bincount(self.links.ravel(), minlength=self.pad + 1)[: self.pad]

    def _solve_routes(self, links: np.ndarray, wts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Routes without implied links, packed to the top rows."""
        mapped = self.solve_map[links]
        order = np.argsort(mapped == self.pad, axis=0, kind="stable")
        hops = max(int((mapped != self.pad).sum(axis=0).max(initial=0)), 1)
        order = order[:hops]
        packed = np.take_along_axis(mapped, order, axis=0)
        return packed, np.where(packed == self.pad, 0.0, np.take_along_axis(wts, order, axis=0))

    def _stack(
        self, a: np.ndarray, b: np.ndarray, wa: np.ndarray, wb: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        hops = max(a.shape[0], b.shape[0])
        a, b = self._grow(a, hops, self.pad), self._grow(b, hops, self.pad)
        wa, wb = self._grow(wa, hops, 0.0), self._grow(wb, hops, 0.0)
        return np.hstack((a, b)), np.hstack((wa, wb))

    @staticmethod
    def _grow(a: np.ndarray, hops: int, fill: float) -> np.ndarray:
        extra = hops - a.shape[0]
        return np.pad(a, ((0, extra), (0, 0)), constant_values=fill) if extra > 0 else a
