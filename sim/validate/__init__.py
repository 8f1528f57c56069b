"""Validation against published measurements: the cases, their runners and the table.

>>> from moesim.validate import CASES, run_cases
>>> [r.status for r in run_cases([c for c in CASES if c.kind == "params"])][:1]
['pass']
"""

from __future__ import annotations

from collections.abc import Iterable
from concurrent.futures import ProcessPoolExecutor

from moesim.validate.cases import CASES, Case
from moesim.validate.runners import RUNNERS, register_runner, run_case
from moesim.validate.table import CaseResult, judge, render_table, results_json


def run_cases(cases: Iterable[Case] = CASES, jobs: int = 1) -> list[CaseResult]:
    """Simulate every case in ``cases`` and judge it against its published value, on
    ``jobs`` worker processes (1: in this process); results in the order of ``cases``."""
    cases = list(cases)
    if jobs <= 1 or len(cases) <= 1:
        return [judge(case, *run_case(case)) for case in cases]
    with ProcessPoolExecutor(max_workers=min(jobs, len(cases))) as pool:
        predictions = list(pool.map(run_case, cases))
    return [judge(case, *pred) for case, pred in zip(cases, predictions, strict=True)]


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
