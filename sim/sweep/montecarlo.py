"""Distributions, not single numbers: summarise seed replicas into mean / p50 / p99.

Rows that differ only in ``seed`` are replicas of one configuration (router draws differ).
:func:`summarize` groups them by the other axis columns and gives, per metric, the mean and
the 50th and 99th percentiles (numpy's linear interpolation between order statistics; with
few seeds p99 is close to the maximum). Failed rows are counted, not averaged.

>>> rows = [{"router.alpha": "1", "seed": str(s), "step_time_s": str(t), "error": ""}
...         for s, t in [(1, 1.0), (2, 2.0), (3, 3.0)]]
>>> out = summarize(rows, ("router.alpha",), metrics=("step_time_s",))
>>> out[0]["n"], out[0]["step_time_s_p50"], out[0]["step_time_s_mean"]
(3, 2.0, 2.0)
"""

from __future__ import annotations

import csv
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from moesim.io import atomic_target

SUMMARY_METRICS = ("step_time_s", "imbalance_excess_s", "congestion_excess_s", "dropped_tokens")
STATS = ("mean", "p50", "p99")


def summarize(
    rows: Sequence[dict[str, str]],
    group_columns: Sequence[str],
    metrics: Sequence[str] = SUMMARY_METRICS,
) -> list[dict[str, object]]:
    """One summary row per distinct value of ``group_columns``, in order of first appearance."""
    groups: dict[tuple[str, ...], list[dict[str, str]]] = {}
    for row in rows:
        groups.setdefault(tuple(row[c] for c in group_columns), []).append(row)
    return [_summary(dict(zip(group_columns, key, strict=True)), members, metrics)
            for key, members in groups.items()]


def _summary(
    key: dict[str, str], members: list[dict[str, str]], metrics: Sequence[str]
) -> dict[str, object]:
    ok = [r for r in members if not r.get("error")]
    out: dict[str, object] = {**key, "n": len(ok), "failed": len(members) - len(ok)}
    for metric in metrics:
        values = np.array([float(r[metric]) for r in ok if r.get(metric, "") != ""])
        for stat in STATS:
            out[f"{metric}_{stat}"] = _stat(values, stat)
    return out


def _stat(values: np.ndarray, stat: str) -> float | None:
    if values.size == 0:
        return None
    if stat == "mean":
        return float(values.mean())
    return float(np.percentile(values, float(stat[1:])))


def summary_path(results: str | Path) -> Path:
    """``results.csv`` -> ``results.summary.csv``."""
    results = Path(results)
    return results.with_name(results.stem + ".summary.csv")


def write_summary(path: str | Path, summary: Sequence[dict[str, object]]) -> Path:
    """Write summary rows as CSV (rewritten whole and atomically: it is derived from the
    results file)."""
    path = Path(path)
    with atomic_target(path) as tmp, tmp.open("w", newline="") as f:
        if summary:
            writer = csv.DictWriter(f, fieldnames=list(summary[0]))
            writer.writeheader()
            writer.writerows({k: "" if v is None else v for k, v in row.items()}
                             for row in summary)
    return path
