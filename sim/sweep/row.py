"""One flat results row per sweep point: its axis values and what the run measured.

Metric columns (seconds unless named otherwise):

* ``imbalance_excess_s`` = step - balanced-router step (the router-imbalance cost);
* ``congestion_excess_s`` = step - uncongested-core step (the fabric-congestion cost);
* ``straggler_*``: the straggler with the largest excess (cause, rank, link, excess_s);
* ``error``: empty when the point ran; else the error, and the metrics are empty;
* ``fingerprint``: the base scenario and moesim build that computed it (stamped by the store).
"""

from __future__ import annotations

import json
from typing import Any

from moesim.results.result import Result
from moesim.sweep.fingerprint import FINGERPRINT_COLUMN
from moesim.sweep.spec import Point

ID_COLUMN = "point_id"
METRIC_COLUMNS = (
    "step_time_s",
    "tokens_per_s",
    "balanced_step_time_s",
    "uncongested_step_time_s",
    "imbalance_excess_s",
    "congestion_excess_s",
    "dropped_tokens",
    "rank_ratio_max",
    "straggler_cause",
    "straggler_rank",
    "straggler_link",
    "straggler_excess_s",
)
ERROR_COLUMN = "error"


def row_columns(axis_columns: tuple[str, ...]) -> list[str]:
    """The results file's header for a sweep with these axis columns; the last column is the
    fingerprint of what computed the row (:mod:`moesim.sweep.fingerprint`)."""
    return [ID_COLUMN, *axis_columns, *METRIC_COLUMNS, ERROR_COLUMN, FINGERPRINT_COLUMN]


def format_value(value: object) -> str:
    """A cell as text: null/true/false like YAML, lists as JSON, numbers round-trip exactly."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list | tuple | dict):
        return json.dumps(value, sort_keys=True)
    return str(value)


def _axis_cells(point: Point) -> dict[str, str]:
    return {ID_COLUMN: point.id, **{p: format_value(v) for p, v in point.values}}


def result_row(point: Point, res: Result) -> dict[str, str]:
    """The row of a point that ran."""
    top = max(res.stragglers, key=lambda s: s.excess_s, default=None)
    metrics: dict[str, Any] = {
        "step_time_s": res.step_time_s,
        "tokens_per_s": res.tokens_per_s,
        "balanced_step_time_s": res.balanced_step_time_s,
        "uncongested_step_time_s": res.uncongested_step_time_s,
        "imbalance_excess_s": _excess(res.step_time_s, res.balanced_step_time_s),
        "congestion_excess_s": _excess(res.step_time_s, res.uncongested_step_time_s),
        "dropped_tokens": res.dropped_tokens,
        "rank_ratio_max": res.imbalance.get("rank_ratio_max"),
        "straggler_cause": top.cause if top else None,
        "straggler_rank": top.rank if top else None,
        "straggler_link": top.link if top else None,
        "straggler_excess_s": top.excess_s if top else None,
    }
    return {**_axis_cells(point), **{k: format_value(v) for k, v in metrics.items()},
            ERROR_COLUMN: ""}


def _excess(step_s: float, counterfactual_s: float | None) -> float | None:
    """Step minus a counterfactual's step (None: the mode simulates no counterfactual)."""
    return None if counterfactual_s is None else step_s - counterfactual_s


def error_row(point: Point, exc: BaseException) -> dict[str, str]:
    """The row of a point that failed: its axis values and the error, one line."""
    message = f"{type(exc).__name__}: {exc}".replace("\n", " ")
    return {**_axis_cells(point), **dict.fromkeys(METRIC_COLUMNS, ""), ERROR_COLUMN: message}
