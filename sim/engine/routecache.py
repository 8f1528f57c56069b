"""Routes of the (source, destination) GPU pairs computed so far, one padded row per pair.

Rows are found by pair code ``src * n_gpus + dst`` in a sorted index (binary search), so a
lookup of many pairs is a few numpy calls; missing pairs are built in one call, sorted by
destination, and appended. A dict from code to row serves one pair at a time (:meth:`row`:
a point-to-point send's route, without the batch lookup's numpy calls).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from moesim.engine.fabric import Fabric
from moesim.errors import FabricError

Builder = Callable[[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]
"""(srcs, dsts sorted) -> padded (links, weights) rows, link -1 as padding."""


class RouteTable:
    """Cached routes: ``link``/``weight`` rows, their ``length``, latency and idle rate."""

    def __init__(self, fabric: Fabric) -> None:
        self.fabric = fabric
        self.n_gpus = fabric.n_gpus
        self.n = 0
        self.link = np.full((0, 1), -1, dtype=np.int64)
        self.weight = np.zeros((0, 1))
        self.length = np.zeros(0, dtype=np.int64)
        self.latency_s = np.zeros(0)
        self.cap_Bps = np.zeros(0)
        self._codes = np.zeros(0, dtype=np.int64)  # sorted
        self._code_row = np.zeros(0, dtype=np.int64)
        self._row_of: dict[int, int] = {}  # the same, for one pair at a time

    def row(self, src: int, dst: int) -> int | None:
        """Row of the pair ``(src, dst)`` (GPU ids in range) if it is built, else None."""
        return self._row_of.get(src * self.n_gpus + dst)

    def rows(self, src: np.ndarray, dst: np.ndarray, build: Builder) -> np.ndarray:
        """Row of every pair ``(src[i], dst[i])``, building the missing ones with ``build``."""
        uniq, inv = np.unique(src * self.n_gpus + dst, return_inverse=True)
        pos = np.minimum(np.searchsorted(self._codes, uniq), max(self._codes.size - 1, 0))
        found = (self._codes[pos] == uniq) if self._codes.size else np.zeros(uniq.size, bool)
        row = np.where(found, self._code_row[pos] if self._codes.size else -1, -1)
        miss = np.flatnonzero(~found)
        if miss.size:
            order = np.lexsort((uniq[miss] // self.n_gpus, uniq[miss] % self.n_gpus))
            codes = uniq[miss][order]
            links, weights = build(codes // self.n_gpus, codes % self.n_gpus)
            new_rows = self._append(links, weights)
            row[miss[order]] = new_rows
            self._row_of.update(zip(codes.tolist(), new_rows.tolist(), strict=True))
            all_codes = np.concatenate((self._codes, codes))
            merge = np.argsort(all_codes, kind="stable")
            self._codes = all_codes[merge]
            self._code_row = np.concatenate((self._code_row, new_rows))[merge]
        return row[inv]

    def _append(self, links: np.ndarray, weights: np.ndarray) -> np.ndarray:
        valid = links >= 0
        length = valid.sum(axis=1)
        if np.any(length == 0):
            raise FabricError("no route between some GPU pair (src == dst or disconnected)")
        safe = np.maximum(links, 0)
        lat = np.where(valid, self.fabric.latency_s[safe] * weights, 0.0).sum(axis=1)
        with np.errstate(divide="ignore"):
            per_link = self.fabric.cap_Bps[safe] / np.where(valid, weights, 1.0)
        cap = np.where(valid, per_link, np.inf).min(axis=1)
        self._reserve(self.n + links.shape[0], links.shape[1])
        new = np.arange(self.n, self.n + links.shape[0])
        self.link[new, : links.shape[1]] = links
        self.weight[new, : links.shape[1]] = weights
        self.length[new], self.latency_s[new], self.cap_Bps[new] = length, lat, cap
        self.n += links.shape[0]
        return new

    def _reserve(self, rows: int, width: int) -> None:
        cap_rows = self.link.shape[0]
        new_rows = max(rows, 2 * cap_rows) if rows > cap_rows else cap_rows
        new_width = max(width, self.link.shape[1])
        if (new_rows, new_width) == self.link.shape:
            return
        link = np.full((new_rows, new_width), -1, dtype=np.int64)
        weight = np.zeros((new_rows, new_width))
        link[: self.n, : self.link.shape[1]] = self.link[: self.n]
        weight[: self.n, : self.weight.shape[1]] = self.weight[: self.n]
        self.link, self.weight = link, weight
        for name in ("length", "latency_s", "cap_Bps"):
            old = getattr(self, name)
            grown = np.zeros(new_rows, dtype=old.dtype)
            grown[: self.n] = old[: self.n]
            setattr(self, name, grown)
