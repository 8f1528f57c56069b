"""moesim.results.band and moesim.validate.bandfile: the out-of-sample error band, its sign
convention and its file."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from moesim.errors import ConfigError
from moesim.results.band import ErrorBand, error_band
from moesim.validate import Case, judge
from moesim.validate.bandfile import (
    band_cases,
    band_from_results,
    speed_error_pct,
    write_band,
)
from moesim.validate.stats import error_stats


def test_stats_by_hand() -> None:
    s = error_stats([10.0, -20.0, 4.0, 6.0])
    assert (s.n, s.bias_pct, s.median_abs_pct, s.max_abs_pct) == (4, 0.0, 8.0, 20.0)
    assert error_stats([]).n == 0 and math.isnan(error_stats([]).bias_pct)


def test_sign_convention_is_positive_when_the_simulator_is_faster() -> None:
    tput = Case("t", "step", (), 100.0, "TFLOP/s", 0.1, "s", scope="end_to_end", gpu="H100",
                path="full")
    cost = Case("c", "step", (), 100.0, "GPU-hours", 0.1, "s", scope="end_to_end", gpu="H800",
                path="fast", lower_is_faster=True)
    assert speed_error_pct(tput, +10.0) == 10.0  # more TFLOP/s than measured: optimistic
    assert speed_error_pct(cost, -10.0) == 10.0  # fewer GPU-hours than measured: optimistic


def test_band_cases_are_out_of_sample_end_to_end_of_that_path() -> None:
    for path in ("fast", "full"):
        for c in band_cases(path):
            assert (c.group, c.scope, c.path) == ("out_of_sample", "end_to_end", path)
    with pytest.raises(ConfigError, match="allowed: fast, full"):
        band_cases("slow")


def test_band_from_results_and_file_round_trip(tmp_path: Path) -> None:
    cases = band_cases("fast") + band_cases("full")
    results = [judge(c, c.published * (1.1 if i % 2 else 0.95), "") for i, c in enumerate(cases)]
    out = write_band(results, tmp_path / "band.json")
    for path in ("fast", "full"):
        filed, live = error_band(path, out), band_from_results(path, results)
        assert filed.cases == live.cases and filed.n == len(band_cases(path))
        if filed.n:
            assert filed.bias_pct == pytest.approx(live.bias_pct)
            assert filed.max_abs_pct == pytest.approx(max(abs(r.error_pct or 0) for r in results
                                                          if r.case.name in filed.cases))
    assert json.loads(out.read_text())["errors_pct"].keys() == {c.name for c in cases}


def test_a_case_without_prediction_is_left_out_of_the_record(tmp_path: Path) -> None:
    cases = band_cases("fast") + band_cases("full")
    results = [judge(c, None if i == 0 else c.published, "") for i, c in enumerate(cases)]
    record = json.loads(write_band(results, tmp_path / "band.json").read_text())
    assert set(record["errors_pct"]) == {c.name for c in cases[1:]}
    assert record["bands"][cases[0].path]["n"] == len(band_cases(cases[0].path)) - 1


def test_write_band_refuses_a_partial_run(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="missing"):
        write_band([], tmp_path / "band.json")


def test_sentence_says_when_there_is_no_evidence() -> None:
    nan = math.nan
    empty = ErrorBand("full", 0, nan, nan, nan, nan, nan, (), "")
    assert "unknown" in empty.sentence() and empty.to_dict()["bias_pct"] is None
    some = ErrorBand("fast", 3, 12.0, 9.0, 20.0, -5.0, 20.0, ("a", "b", "c"), "")
    assert "12% optimistic" in some.sentence() and "3 published" in some.sentence()
    assert (some.low_rel, some.high_rel) == (-0.05, 0.2)
    assert ErrorBand("fast", 1, 3.0, 3.0, 3.0, 3.0, 3.0, ("a",), "").low_rel == 0.0
