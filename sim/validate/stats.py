"""Error statistics of a set of validation results: count, bias, median and max |error|.

Bias is the mean signed error in percent of the published value (positive: the model predicts
more than was measured; for a throughput that means optimistic). Results without a prediction
are left out of every statistic.

>>> s = error_stats([4.0, -2.0, 10.0])
>>> (s.n, round(s.bias_pct, 2), s.median_abs_pct, s.max_abs_pct)
(3, 4.0, 4.0, 10.0)
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class ErrorStats:
    """Count, mean signed error and median / max absolute error, all in percent."""

    n: int
    bias_pct: float
    median_abs_pct: float
    max_abs_pct: float

    def line(self) -> str:
        """One line for tables: ``n 3, bias +4.0%, median |err| 4.0%, max |err| 10.0%``."""
        if not self.n:
            return "n 0"
        return (f"n {self.n}, bias {self.bias_pct:+.1f}%, median |err| "
                f"{self.median_abs_pct:.1f}%, max |err| {self.max_abs_pct:.1f}%")


def error_stats(errors_pct: Iterable[float]) -> ErrorStats:
    """The statistics of signed errors in percent (an empty set gives n 0 and NaNs)."""
    err = np.asarray(list(errors_pct), dtype=float)
    if not err.size:
        nan = float("nan")
        return ErrorStats(0, nan, nan, nan)
    return ErrorStats(int(err.size), float(err.mean()), float(np.median(np.abs(err))),
                      float(np.abs(err).max()))
