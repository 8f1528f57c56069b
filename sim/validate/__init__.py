"""Validation against published measurements: the cases, their runners and the table.

>>> from moesim.validate import CASES, run_cases
>>> [r.status for r in run_cases([c for c in CASES if c.kind == "params"])][:1]
['pass']
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from concurrent.futures import ProcessPoolExecutor

from moesim.validate.cases import CASES, Case
from moesim.validate.runners import RUNNERS, register_runner, run_case
from moesim.validate.table import CaseResult, judge, render_table, results_json


def run_cases(cases: Iterable[Case] = CASES, jobs: int = 1,
              here: Collection[str] = ()) -> list[CaseResult]:
    """Simulate every case in ``cases`` and judge it against its published value, on
    ``jobs`` worker processes (1: in this process); results in the order of ``cases``.
    With workers, the cases named in ``here`` run in this process meanwhile (so that their
    cached step results, :mod:`moesim.validate.step`, are this process's to read)."""
    cases = list(cases)
    if jobs <= 1 or len(cases) <= 1:
        return [judge(case, *run_case(case)) for case in cases]
    away = [i for i, case in enumerate(cases) if case.name not in here]
    order = sorted(away, key=lambda i: _expected_cost(cases[i]), reverse=True)
    with ProcessPoolExecutor(max_workers=max(1, min(jobs, len(order)))) as pool:
        pending = pool.map(run_case, [cases[i] for i in order])  # all submitted now
        predictions = {i: run_case(case) for i, case in enumerate(cases) if case.name in here}
        predictions.update(zip(order, pending, strict=True))
    return [judge(case, *predictions[i]) for i, case in enumerate(cases)]


_KIND_COST = {"step": 4, "training_cost": 3, "bridge": 1}


def _expected_cost(case: Case) -> tuple[int, int]:
    """A rough rank of a case's simulation time (whole steps first, large ones first): the
    pool starts the longest cases first, so the last worker is not left with one long case
    while the others idle. Results keep the order of the cases."""
    gpus = dict(case.args).get("gpus", 2048 if case.kind == "training_cost" else 0)
    return _KIND_COST.get(case.kind, 0), int(str(gpus))


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
