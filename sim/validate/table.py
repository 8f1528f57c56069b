"""Validation results: one immutable record per case, a text table and JSON."""

from __future__ import annotations

import json
from dataclasses import dataclass

from moesim.validate.cases import GROUPS, SCOPES, Case
from moesim.validate.ranking import ranking_verdicts
from moesim.validate.stats import error_stats

PASS, FAIL, NOT_SIMULABLE = "pass", "FAIL", "n/a"


@dataclass(frozen=True)
class CaseResult:
    """A case with its prediction: error in percent of the published value and the verdict."""

    case: Case
    predicted: float | None
    error_pct: float | None
    status: str
    detail: str

    @property
    def tolerance_pct(self) -> float:
        return self.case.tolerance_rel * 100.0

    @property
    def speed_error_pct(self) -> float | None:
        """The error with "+ = the simulator predicts faster than measured" (optimistic);
        a cost's (GPU-hours: ``lower_is_faster``) sign is turned."""
        if self.error_pct is None:
            return None
        return -self.error_pct if self.case.lower_is_faster else self.error_pct

    @property
    def passed(self) -> bool:
        return self.status == PASS

    def to_dict(self) -> dict[str, object]:
        """One JSON row: the case's fields beside the prediction, flat."""
        c = self.case
        return {"name": c.name, "predicted": self.predicted, "published": c.published,
                "unit": c.unit, "error_pct": self.error_pct, "tolerance_pct": self.tolerance_pct,
                "status": self.status, "group": c.group, "source": c.source,
                "detail": self.detail, "scope": c.scope, "generation": c.generation,
                "path": c.path, "tolerance_why": c.tolerance_why,
                "lower_is_faster": c.lower_is_faster, "ranking": c.ranking}


def judge(case: Case, predicted: float | None, detail: str) -> CaseResult:
    """Compare ``predicted`` with ``case.published`` within its tolerance."""
    if predicted is None:
        return CaseResult(case, None, None, NOT_SIMULABLE, detail or case.note)
    err = (predicted - case.published) / case.published * 100.0
    status = PASS if abs(err) <= case.tolerance_rel * 100.0 else FAIL
    return CaseResult(case, float(predicted), err, status, detail)


def _num(value: float | None) -> str:
    if value is None:
        return "-"
    if value >= 1e9:
        return f"{value / 1e9:.2f}B"
    return f"{value:.1f}"


def _rows(results: list[CaseResult], show_detail: bool) -> list[str]:
    head = ("case", "predicted", "published", "unit", "error", "tol", "result", "source")
    rows = [head]
    for r in results:
        err = "-" if r.error_pct is None else f"{r.error_pct:+.1f}%"
        rows.append((r.case.name, _num(r.predicted), _num(r.case.published), r.case.unit, err,
                     f"{r.tolerance_pct:.0f}%", r.status, r.case.source))
    widths = [max(len(row[i]) for row in rows) for i in range(len(head) - 1)]
    lines = []
    for i, row in enumerate(rows):
        cells = [c.ljust(w) for c, w in zip(row[:-1], widths, strict=True)] + [row[-1]]
        lines.append("  ".join(cells).rstrip())
        if i == 0:
            lines.append("  ".join("-" * w for w in widths) + "  ------")
        elif show_detail and results[i - 1].detail:
            lines.append(" " * 4 + results[i - 1].detail)
    return lines


def _stats_lines(results: list[CaseResult]) -> list[str]:
    """Per scope, and per GPU generation of the end-to-end cases, the error statistics."""
    scored = [(r, e) for r in results if (e := r.speed_error_pct) is not None]
    lines = ["  (bias: mean signed error, + = the model predicts more speed or bandwidth than "
             "measured)"] if scored else []
    for scope in SCOPES:
        errs = [e for r, e in scored if r.case.scope == scope]
        if errs:
            lines.append(f"  {scope:<12} {error_stats(errs).line()}")
    e2e = [(r, e) for r, e in scored if r.case.scope == "end_to_end"]
    for gen in sorted({r.case.generation for r, _ in e2e}):
        errs = [e for r, e in e2e if r.case.generation == gen]
        lines.append(f"  end_to_end on {gen}: {error_stats(errs).line()}")
    return lines


_TITLES = {"consistency": "CONSISTENCY (the model reproduces its own calibration inputs, or a "
                          "constant was chosen with the case in view)",
           "out_of_sample": "OUT-OF-SAMPLE (measurements that chose no constant)"}


def render_table(results: list[CaseResult], *, show_detail: bool = False) -> str:
    """The two groups apart: each a fixed-width table (case, predicted, published, error,
    tolerance, verdict, source), then its count, bias, median and max |error| per scope and
    per GPU generation of the end-to-end cases."""
    lines: list[str] = []
    for group in GROUPS:
        members = [r for r in results if r.case.group == group]
        if not members:
            continue
        lines += ["", _TITLES[group], *_rows(members, show_detail), *_stats_lines(members)]
    verdicts = ranking_verdicts([(r.case, r.predicted) for r in results])
    if verdicts:
        lines += ["", "LAYOUT RANKINGS (published order vs simulated, fastest first)",
                  *(v.line() for v in verdicts)]
    n_pass = sum(r.passed for r in results)
    n_fail = sum(r.status == FAIL for r in results)
    n_na = sum(r.status == NOT_SIMULABLE for r in results)
    lines.append(f"\n{n_pass} pass, {n_fail} fail, {n_na} not yet simulable")
    return "\n".join(lines).lstrip("\n")


def results_json(results: list[CaseResult]) -> str:
    """The results as a JSON array (one :meth:`CaseResult.to_dict` object per case)."""
    return json.dumps([r.to_dict() for r in results], indent=2)
