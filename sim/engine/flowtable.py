"""Append-only columns of per-flow data, grown by doubling (no per-flow objects)."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

FLOW_COLUMNS: dict[str, tuple[type, float]] = {
    "src": (np.int64, -1),
    "dst": (np.int64, -1),
    "group": (np.int64, -1),
    "tag": (np.int64, -1),
    "size_bytes": (np.float64, 0.0),
    "rem_bytes": (np.float64, 0.0),  # as of start, joining the solved flows, finish: progress()
    "rate_Bps": (np.float64, 0.0),
    "start_s": (np.float64, np.nan),
    "drain_s": (np.float64, np.nan),
    "finish_s": (np.float64, np.nan),
    "latency_s": (np.float64, 0.0),
    "ideal_s": (np.float64, 0.0),
    "pair_ptr": (np.int64, 0),
    "pair_len": (np.int64, 0),
    "bottleneck": (np.int64, -1),
    "observer": (np.int64, -1),  # FlowNetwork.observe: told when the flow's rate changes
}

class Columns:
    """Named numpy columns sharing one length, grown by doubling."""

    def __init__(self, spec: dict[str, tuple[type, float]], capacity: int = 1024) -> None:
        self._spec = spec
        self.n = 0
        self.col: dict[str, np.ndarray] = {
            k: np.full(capacity, fill, dtype=dt) for k, (dt, fill) in spec.items()
        }

    def append(self, **values: npt.ArrayLike) -> np.ndarray:
        """Append rows (all given columns equally long); returns their indices."""
        count = np.size(next(iter(values.values())))
        self._reserve(self.n + count)
        ids = np.arange(self.n, self.n + count)
        for key, val in values.items():
            self.col[key][ids] = val
        self.n += count
        return ids

    def append_row(self, **values: float) -> int:
        """:meth:`append` of one row of scalars (no index arrays); returns its index."""
        row = self.n
        self._reserve(row + 1)
        for key, val in values.items():
            self.col[key][row] = val
        self.n = row + 1
        return row

    def _reserve(self, need: int) -> None:
        cap = next(iter(self.col.values())).shape[0]
        if need <= cap:
            return
        new_cap = max(need, 2 * cap)
        for key, (dt, fill) in self._spec.items():
            grown: np.ndarray = np.full(new_cap, fill, dtype=dt)
            grown[:cap] = self.col[key]
            self.col[key] = grown

    def __getitem__(self, key: str) -> np.ndarray:
        return self.col[key][: self.n]


class PairStore:
    """Append-only (link, weight) pairs of every flow's route."""

    def __init__(self, capacity: int = 4096) -> None:
        self.n = 0
        self.link = np.zeros(capacity, dtype=np.int64)
        self.weight = np.zeros(capacity)

    def append(self, link: np.ndarray, weight: np.ndarray) -> int:
        need = self.n + link.size
        if need > self.link.size:
            cap = max(need, 2 * self.link.size)
            self.link = np.resize(self.link, cap)
            self.weight = np.resize(self.weight, cap)
        start = self.n
        self.link[start:need] = link
        self.weight[start:need] = weight
        self.n = need
        return start

    def route(self, ptr: int, length: int) -> tuple[np.ndarray, np.ndarray]:
        return self.link[ptr : ptr + length], self.weight[ptr : ptr + length]
