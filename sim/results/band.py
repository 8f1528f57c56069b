"""The out-of-sample error band a report quotes beside a simulated step time (a record).

A report that prints a step time from the ``fast`` or ``full`` step simulator quotes how far
that same code path landed from published end-to-end measurements that chose no constant
(the ``out_of_sample`` / ``end_to_end`` cases of :mod:`moesim.validate.cases` whose ``path``
is that path). Running them takes minutes, so the band is read from ``band.json`` beside this
module, which ``moesim validate --write-band`` regenerates from a live run of every such case
(:mod:`moesim.validate.bandfile`; tests/test_validate.py checks the file against a live run).

Errors are in "speed" terms: ``sim / measured - 1`` of the step's speed (throughput), so
positive = the simulator predicts a faster step than was measured (optimistic). A case
published as a cost (GPU-hours, seconds) has its sign turned.

>>> band = error_band("fast")
>>> band.path, band.n == len(band.cases), band.low_rel <= 0 <= band.high_rel
('fast', True, True)
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass
from pathlib import Path

from moesim.errors import ConfigError

BAND_FILE = Path(__file__).with_name("band.json")
BAND_PATHS = ("fast", "full")


@dataclass(frozen=True)
class ErrorBand:
    """Out-of-sample end-to-end error of one step-simulator code path, in percent (speed
    terms: positive = optimistic). NaN statistics when ``n`` is 0."""

    path: str
    n: int
    bias_pct: float  # mean signed error
    median_abs_pct: float
    max_abs_pct: float
    min_pct: float  # most pessimistic case (signed)
    max_pct: float  # most optimistic case (signed)
    cases: tuple[str, ...]
    generated: str

    @property
    def low_rel(self) -> float:
        """Lower relative bound of sim/measured - 1 over the cases, <= 0 (NaN when n is 0)."""
        return min(self.min_pct, 0.0) / 100 if self.n else math.nan

    @property
    def high_rel(self) -> float:
        """Upper relative bound of sim/measured - 1 over the cases, >= 0 (NaN when n is 0)."""
        return max(self.max_pct, 0.0) / 100 if self.n else math.nan

    def to_dict(self) -> dict[str, object]:
        """JSON-safe fields (NaN statistics of an empty band become None)."""
        out: dict[str, object] = asdict(self)
        out["cases"] = list(self.cases)
        out["low_rel"], out["high_rel"] = self.low_rel, self.high_rel
        for key, value in list(out.items()):
            if isinstance(value, float) and math.isnan(value):
                out[key] = None
        return out

    def sentence(self) -> str:
        """One line for a report (names the count, so n == 0 reads as "no evidence")."""
        if not self.n:
            return (f"no out-of-sample end-to-end case checks the {self.path} step simulator "
                    "yet: its error against measurement is unknown")
        lean = "optimistic" if self.bias_pct > 0 else "pessimistic"
        return (f"against {self.n} published end-to-end run(s) that chose no constant, the "
                f"{self.path} step simulator was {abs(self.bias_pct):.0f}% {lean} on average "
                f"(median |error| {self.median_abs_pct:.0f}%, range {self.min_pct:+.0f}% to "
                f"{self.max_pct:+.0f}%)")


def check_path(path: str) -> None:
    """ConfigError unless ``path`` is a step-simulator code path with a band."""
    if path not in BAND_PATHS:
        raise ConfigError("path", f"unknown {path!r}; allowed: {', '.join(BAND_PATHS)}")


def error_band(path: str = "fast", file: Path = BAND_FILE) -> ErrorBand:
    """The out-of-sample error band of step-simulator code path ``path`` ("fast" | "full"),
    as the last ``moesim validate --write-band`` measured it."""
    check_path(path)
    row = json.loads(file.read_text())["bands"][path]
    row = {k: v for k, v in row.items() if k not in ("low_rel", "high_rel")}
    nan = math.nan
    return ErrorBand(**{**row, "cases": tuple(row["cases"]),
                        **{k: nan if row[k] is None else row[k]
                           for k in ("bias_pct", "median_abs_pct", "max_abs_pct", "min_pct",
                                     "max_pct")}})
