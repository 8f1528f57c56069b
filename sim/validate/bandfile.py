"""Regenerate the error-band record (:mod:`moesim.results.band`) from validation results."""

from __future__ import annotations

import json
from collections.abc import Iterable
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

from moesim.errors import ConfigError
from moesim.results.band import BAND_FILE, BAND_PATHS, ErrorBand, check_path
from moesim.validate.cases import CASES, Case
from moesim.validate.stats import error_stats
from moesim.validate.table import CaseResult


def band_cases(path: str, cases: Iterable[Case] = CASES) -> tuple[Case, ...]:
    """The cases that make the band of ``path``: out-of-sample, end-to-end, that path."""
    check_path(path)
    return tuple(c for c in cases
                 if c.group == "out_of_sample" and c.scope == "end_to_end" and c.path == path)


def speed_error_pct(case: Case, error_pct: float) -> float:
    """``error_pct`` turned to "positive = the simulated step is faster than measured"."""
    return -error_pct if case.lower_is_faster else error_pct


def band_from_results(path: str, results: Iterable[CaseResult], generated: str = ""
                      ) -> ErrorBand:
    """The band of ``path`` from live results (cases without a prediction are left out)."""
    by_name = {c.name: c for c in band_cases(path)}
    pairs = [(by_name[r.case.name], r.error_pct) for r in results
             if r.case.name in by_name and r.error_pct is not None]
    speed = [speed_error_pct(c, e) for c, e in pairs]
    stats = error_stats(speed)
    lo, hi = (float(np.min(speed)), float(np.max(speed))) if speed else (np.nan, np.nan)
    return ErrorBand(path, stats.n, stats.bias_pct, stats.median_abs_pct, stats.max_abs_pct,
                     lo, hi, tuple(c.name for c, _ in pairs), generated)


def write_band(results: list[CaseResult], file: Path = BAND_FILE) -> Path:
    """Write the band record from ``results``; refused unless every band case was run. A case
    that could not be simulated (no error) is left out of the record, as out of the band."""
    wanted = {c.name for p in BAND_PATHS for c in band_cases(p)}
    missing = sorted(wanted - {r.case.name for r in results})
    if missing:
        raise ConfigError("--write-band", f"needs every out-of-sample end-to-end case; "
                          f"missing: {', '.join(missing)} (run without --kind)")
    stamp = datetime.now(UTC).strftime("%Y-%m-%d")
    record = {
        "generated": stamp,
        "errors_pct": {r.case.name: r.error_pct for r in results
                       if r.case.name in wanted and r.error_pct is not None},
        "bands": {p: band_from_results(p, results, stamp).to_dict() for p in BAND_PATHS},
    }
    file.write_text(json.dumps(record, indent=1) + "\n")
    return file
