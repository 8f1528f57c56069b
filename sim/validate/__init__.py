"""Validation against published measurements: the cases, their runners and the table.

>>> from moesim.validate import CASES, run_cases
>>> [r.status for r in run_cases([c for c in CASES if c.kind == "params"])][:1]
['pass']
"""

from __future__ import annotations

from collections.abc import Iterable

from moesim.validate.cases import CASES, Case
from moesim.validate.runners import RUNNERS, register_runner, run_case
from moesim.validate.table import CaseResult, judge, render_table, results_json


def run_cases(cases: Iterable[Case] = CASES) -> list[CaseResult]:
    """Simulate every case in ``cases`` and judge it against its published value."""
    return [judge(case, *run_case(case)) for case in cases]


__all__ = [
    "CASES",
    "RUNNERS",
    "Case",
    "CaseResult",
    "judge",
    "register_runner",
    "render_table",
    "results_json",
    "run_case",
    "run_cases",
]
