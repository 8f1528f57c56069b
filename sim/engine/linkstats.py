"""Per-link counters kept while flows run: bytes, busy time, peaks, timeline.

The network calls :meth:`LinkStats.interval` once per constant-rate interval
with the bytes each link carried in it and the load at its start; the counters
never look at individual flows.
"""

from __future__ import annotations

import numpy as np


class LinkStats:
    """Accumulates link counters; ``timeline`` keeps (time_s, load_Bps) samples."""

    def __init__(self, cap_Bps: np.ndarray, record_timeline: bool = True) -> None:
        n = cap_Bps.shape[0]
        self.cap_Bps = cap_Bps
        self.bytes = np.zeros(n)
        self.busy_s = np.zeros(n)
        self.peak_util = np.zeros(n)
        self.peak_flows = np.zeros(n, dtype=np.int64)
        self.record_timeline = record_timeline
        self.sample_t: list[float] = []
        self.sample_load: list[np.ndarray] = []

    def interval(
        self, t0_s: float, dt_s: float, bytes_moved: np.ndarray, load_Bps: np.ndarray
    ) -> None:
        """Charge one interval [t0, t0+dt) in which links carried ``bytes_moved``."""
        if dt_s <= 0:
            return
        self.bytes += bytes_moved
        self.busy_s += np.where(load_Bps > 0, dt_s, 0.0)

    def interval_on(self, links: np.ndarray, t0_s: float, dt_s: float, bytes_moved: np.ndarray,
                    load_Bps: np.ndarray) -> None:
        """:meth:`interval` for an interval in which only ``links`` (distinct) carried
        anything: ``bytes_moved`` and ``load_Bps`` per link of ``links``."""
        if dt_s <= 0:
            return
        self.bytes[links] += bytes_moved
        self.busy_s[links] += np.where(load_Bps > 0, dt_s, 0.0)

    def sample_on(self, t_s: float, links: np.ndarray, load_Bps: np.ndarray,
                  flows_per_link: np.ndarray) -> bool:
        """:meth:`sample` where only ``links`` changed (their load and flow count now: per
        link of ``links``); False (nothing done) when a timeline is kept, which needs every
        link's load: call :meth:`sample` then."""
        if self.record_timeline:
            return False
        self.peak_util[links] = np.maximum(self.peak_util[links], load_Bps / self.cap_Bps[links])
        self.peak_flows[links] = np.maximum(self.peak_flows[links], flows_per_link)
        return True

    def sample(self, t_s: float, load_Bps: np.ndarray, flows_per_link: np.ndarray) -> None:
        """Record the load that holds from ``t_s`` until the next sample."""
        np.maximum(self.peak_util, load_Bps / self.cap_Bps, out=self.peak_util)
        np.maximum(self.peak_flows, flows_per_link, out=self.peak_flows)
        if self.record_timeline:
            if self.sample_t and self.sample_t[-1] == t_s:
                self.sample_load[-1] = load_Bps.astype(np.float32)
            else:
                self.sample_t.append(t_s)
                self.sample_load.append(load_Bps.astype(np.float32))

    def timeline(self) -> tuple[np.ndarray, np.ndarray]:
        """Sample times (n,) and utilisation (n, links), each holding until the next time."""
        if not self.sample_t:
            return np.zeros(0), np.zeros((0, self.cap_Bps.shape[0]))
        loads = np.vstack(self.sample_load)
        return np.asarray(self.sample_t), loads / self.cap_Bps[None, :]

    def mean_util(self, links: np.ndarray, t0_s: float, t1_s: float) -> np.ndarray:
        """Time-averaged utilisation of ``links`` over [t0, t1] from the samples."""
        times, util = self.timeline()
        if times.size == 0 or t1_s <= t0_s:
            return np.zeros(links.shape[0])
        edges = np.append(times, np.inf)
        lo = np.clip(edges[:-1], t0_s, t1_s)
        hi = np.clip(edges[1:], t0_s, t1_s)
        weight = (hi - lo) / (t1_s - t0_s)
        return weight @ util[:, links]
