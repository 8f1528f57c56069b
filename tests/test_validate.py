"""moesim validate: every simulable case within its tolerance, the table and the CLI."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from sim.commands_validate import validate
from sim.errors import ConfigError
from sim.validate import CASES, Case, judge, register_runner, render_table, run_case, run_cases
from sim.validate.table import FAIL, NOT_SIMULABLE, PASS, CaseResult

KIMI = "kimi-k2 total parameters"
"""Outside its 1% tolerance (1.0264T counted from the config vs 1.04T published, -1.3%);
no principled counting convention found that closes the gap, so it is reported as FAIL in
the table and left out of the tolerance test below (see the validation report)."""


@pytest.fixture(scope="module")
def results() -> dict[str, CaseResult]:
    return {r.name: r for r in run_cases()}


@pytest.mark.parametrize("name", [c.name for c in CASES if c.kind != "step" and c.name != KIMI])
def test_case_within_tolerance(results: dict[str, CaseResult], name: str) -> None:
    r = results[name]
    assert r.predicted is not None and r.error_pct is not None
    assert abs(r.error_pct) <= r.tolerance_pct, f"{name}: {r.error_pct:+.1f}%"
    assert r.status == PASS


def test_kimi_reported_as_measured(results: dict[str, CaseResult]) -> None:
    r = results[KIMI]
    assert r.predicted == 1_026_408_232_448
    assert r.status == FAIL and r.error_pct == pytest.approx(-1.307, abs=1e-3)


def test_mixtral_step_listed_without_number(results: dict[str, CaseResult]) -> None:
    (r,) = [r for r in results.values() if r.name.startswith("Mixtral")]
    assert r.predicted is None and r.status == NOT_SIMULABLE and "issue 5" in r.detail


def test_every_case_has_a_source_and_unique_name() -> None:
    assert len({c.name for c in CASES}) == len(CASES)
    assert all(c.source for c in CASES)


def test_judge_by_hand() -> None:
    case = Case("x", "params", (), 100.0, "u", 0.15, "src")
    assert judge(case, 115.0, "").status == PASS
    assert judge(case, 115.1, "").status == FAIL
    assert judge(case, 85.0, "").error_pct == pytest.approx(-15.0)
    assert judge(case, None, "why").status == NOT_SIMULABLE


def test_bad_cases_and_runners() -> None:
    with pytest.raises(ConfigError, match="allowed: validation, consistency"):
        Case("x", "params", (), 1.0, "u", 0.1, "s", check="maybe")
    with pytest.raises(ConfigError, match="must be > 0"):
        Case("x", "params", (), 0.0, "u", 0.1, "s")
    with pytest.raises(ConfigError, match="duplicate"):
        register_runner("params", lambda c: (None, ""))
    with pytest.raises(ConfigError, match="unknown 'zip'"):
        run_case(Case("x", "zip", (), 1.0, "u", 0.1, "s"))


def test_render_table_columns() -> None:
    case = Case("c1", "params", (), 100.0, "GB/s", 0.15, "somewhere")
    text = render_table([judge(case, 110.0, "d")], show_detail=True)
    assert "c1" in text and "+10.0%" in text and "15%" in text and "somewhere" in text
    assert "1 pass, 0 fail" in text and "    d" in text


def test_cli_table_and_exit_status() -> None:
    out = CliRunner().invoke(validate, ["--kind", "gemm"])
    assert out.exit_code == 0 and "H100 BF16 GEMM" in out.output
    out = CliRunner().invoke(validate, ["--kind", "params"])
    assert out.exit_code == 1 and "FAIL" in out.output  # Kimi K2, see KIMI


def test_cli_json() -> None:
    out = CliRunner().invoke(validate, ["--kind", "params", "--json"])
    rows = json.loads(out.output)
    assert {r["name"] for r in rows} == {c.name for c in CASES if c.kind == "params"}
    assert set(rows[0]) >= {"predicted", "published", "error_pct", "tolerance_pct", "status",
                            "source"}
