"""Link utilisation over time in a bounded number of bins, for traces of long steps.

``LinkStats`` charges every interval in which the link loads were constant (the engine calls
``interval(t0, dt, bytes_moved, load)``). :class:`BinnedLinkStats` also adds each interval's
bytes into ``MAX_BINS`` time bins, split in proportion to the overlap (exact: the load is
constant over the interval). A bin's mean utilisation is its bytes over capacity x width, so
it is the exact time average over the bin. When an interval ends past the last bin, adjacent
bins merge in pairs (the width doubles) until it fits: memory stays MAX_BINS x links (float32),
whatever the step's length.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from moesim.engine.linkstats import LinkStats

MAX_BINS = 128
FIRST_WIDTH_S = 1e-4


@dataclass
class LinkBins:
    """Bytes per (time bin, link); bin ``i`` covers ``[i * width_s, (i + 1) * width_s)``."""

    cap_Bps: np.ndarray
    width_s: float = FIRST_WIDTH_S
    bytes: np.ndarray | None = None

    def __post_init__(self) -> None:
        if self.bytes is None:
            self.bytes = np.zeros((MAX_BINS, self.cap_Bps.shape[0]), dtype=np.float32)

    def add(self, t0_s: float, dt_s: float, moved: np.ndarray) -> None:
        """Charge ``moved`` bytes, carried evenly over ``[t0_s, t0_s + dt_s)``."""
        assert self.bytes is not None
        t1_s = t0_s + dt_s
        while t1_s > MAX_BINS * self.width_s:
            self._coarsen()
        first, last = int(t0_s // self.width_s), min(int(t1_s // self.width_s), MAX_BINS - 1)
        if first == last:
            self.bytes[first] += moved
            return
        for i in range(first, last + 1):
            lo, hi = max(t0_s, i * self.width_s), min(t1_s, (i + 1) * self.width_s)
            if hi > lo:
                self.bytes[i] += moved * ((hi - lo) / dt_s)

    def _coarsen(self) -> None:
        assert self.bytes is not None
        half = MAX_BINS // 2
        self.bytes[:half] = self.bytes.reshape(half, 2, -1).sum(axis=1)
        self.bytes[half:] = 0.0
        self.width_s *= 2

    def utilisation(self, end_s: float) -> tuple[np.ndarray, np.ndarray]:
        """(bin start times, mean utilisation [bin, link]) of the bins before ``end_s``."""
        assert self.bytes is not None
        n = max(1, min(MAX_BINS, int(np.ceil(end_s / self.width_s))))
        starts = np.arange(n) * self.width_s
        return starts, self.bytes[:n] / (self.cap_Bps[None, :] * self.width_s)


class BinnedLinkStats(LinkStats):
    """:class:`LinkStats` that also keeps :class:`LinkBins` (``.bins``)."""

    def __init__(self, cap_Bps: np.ndarray, record_timeline: bool = False) -> None:
        super().__init__(cap_Bps, record_timeline)
        self.bins = LinkBins(cap_Bps)

    def interval(self, t0_s: float, dt_s: float, bytes_moved: np.ndarray,
                 load_Bps: np.ndarray) -> None:
        super().interval(t0_s, dt_s, bytes_moved, load_Bps)
        if dt_s > 0:
            self.bins.add(t0_s, dt_s, bytes_moved)

    def interval_on(self, links: np.ndarray, t0_s: float, dt_s: float, bytes_moved: np.ndarray,
                    load_Bps: np.ndarray) -> None:
        super().interval_on(links, t0_s, dt_s, bytes_moved, load_Bps)
        if dt_s > 0:
            self.bins.add(t0_s, dt_s, np.bincount(links, weights=bytes_moved,
                                                  minlength=self.cap_Bps.shape[0]))
