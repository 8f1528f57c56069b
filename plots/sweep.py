"""Sweep curves: step time against one axis, with a p50 line and p1..p99 band over seeds.

Reads a sweep CSV (one row per point). Axis columns are every column that is not a known
metric, ``point_id``, ``error`` or ``fingerprint``; ``--x`` picks the x axis (default: the
first axis that is not ``seed``). Rows agreeing on the other non-seed axes form one series;
rows agreeing also on x (i.e. differing only in seed) give the p50 and the band. Rows with an
error or no step time are skipped. The lower panel draws the median imbalance and congestion
excess when those columns exist, and dropped tokens on a right axis when any were dropped.
Text x values (e.g. ``ecmp``, ``spray``; empty = ``none``) become categories.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from moesim.errors import ConfigError
from moesim.plots.common import load_csv, new_figure, save

KNOWN = {
    "point_id", "error", "step_time_s", "tokens_per_s", "balanced_step_time_s",
    "uncongested_step_time_s", "imbalance_excess_s", "congestion_excess_s", "dropped_tokens",
    "rank_ratio_max", "top_cause", "top_rank", "top_link", "top_excess_s", "straggler_cause",
    "straggler_rank", "straggler_link", "straggler_excess_s",
    "fingerprint",  # what computed the row (moesim.sweep.fingerprint): a hash, not an axis
}
EXCESS = (("imbalance_excess_s", "imbalance excess"), ("congestion_excess_s", "congestion excess"))


def axis_columns(columns: Sequence[str]) -> list[str]:
    return [c for c in columns if c not in KNOWN]


def _number(text: str | None) -> float | None:
    try:
        return float(text) if text not in (None, "") else None
    except ValueError:
        return None


def _x_key(values: list[str]) -> tuple[list[float], list[str] | None]:
    """Numeric positions of the x values, and category labels when they are not numbers."""
    nums = [_number(v) for v in values]
    if all(n is not None for n in nums):
        return [float(n) for n in nums if n is not None], None
    cats = list(dict.fromkeys(values))
    return [float(cats.index(v)) for v in values], [c or "none" for c in cats]


def sweep_series(rows: list[dict[str, str]], x: str, metric: str) -> dict[str, dict[str, Any]]:
    """Per series label: sorted x positions, p1/p50/p99 of ``metric`` and category labels."""
    axes = [c for c in axis_columns(list(rows[0])) if c not in (x, "seed")] if rows else []
    good = [r for r in rows if not r.get("error") and _number(r.get(metric)) is not None]
    xs, cats = _x_key([r.get(x, "") for r in good])
    groups: dict[str, dict[float, list[float]]] = {}
    for pos, r in zip(xs, good, strict=True):
        label = ", ".join(f"{a}={r.get(a, '')}" for a in axes)
        groups.setdefault(label, {}).setdefault(pos, []).append(float(r[metric]))
    out = {}
    for label, by_x in groups.items():
        pts = sorted(by_x)
        vals = [np.asarray(by_x[p]) for p in pts]
        out[label] = {
            "x": np.asarray(pts),
            "p1": np.array([np.percentile(v, 1) for v in vals]),
            "p50": np.array([np.percentile(v, 50) for v in vals]),
            "p99": np.array([np.percentile(v, 99) for v in vals]),
            "n": np.array([v.size for v in vals]),
            "cats": cats,
        }
    return out


def draw_sweep(csv_path: str | Path, out: str | Path, x: str | None = None) -> Path:
    """Draw the sweep curves of the CSV at ``csv_path`` to ``out``."""
    rows = load_csv(csv_path)
    if not rows or "step_time_s" not in rows[0]:
        hint = ("; it looks like a sweep summary: give the sweep's results CSV"
                if rows and "step_time_s_p50" in rows[0] else "")
        raise ConfigError("results", f"{csv_path} has no rows with a step_time_s column{hint}")
    axes = axis_columns(list(rows[0]))
    x = x or next((a for a in axes if a != "seed"), None)
    if x is None or x not in rows[0]:
        raise ConfigError("x", f"unknown column {x!r}; allowed: {', '.join(axes) or '(none)'}")
    excess = [(c, name) for c, name in EXCESS if c in rows[0]]
    fig = new_figure(8.0, 6.5 if excess else 4.2)
    top = fig.add_subplot(2 if excess else 1, 1, 1)
    _draw_metric(top, sweep_series(rows, x, "step_time_s"), band=True, label_prefix="")
    seeds = "seed" in rows[0]
    top.set_ylabel("step time (ms)" + ("\np50, band p1-p99 over seeds" if seeds else ""))
    top.set_title(f"{Path(csv_path).stem}: step time vs {x}")
    if excess:
        bottom = fig.add_subplot(2, 1, 2, sharex=top)
        for i, (col, name) in enumerate(excess):
            _draw_metric(bottom, sweep_series(rows, x, col), band=False, label_prefix=name,
                         style="-" if i == 0 else "--", color_offset=i, legend=False)
        bottom.set_ylabel("excess, p50 (ms)")
        bottom.set_xlabel(x)
        right = _draw_dropped(bottom, rows, x)
        handles, labels = bottom.get_legend_handles_labels()
        if right is not None:
            more = right.get_legend_handles_labels()
            handles, labels = handles + more[0], labels + more[1]
        bottom.legend(handles, labels, fontsize=7, frameon=False, loc="upper left",
                      bbox_to_anchor=(1.12 if right is not None else 1.0, 1.0))
    else:
        top.set_xlabel(x)
    return save(fig, out)


def _draw_metric(ax: Any, series: dict[str, dict[str, Any]], band: bool, label_prefix: str,
                 style: str = "-", color_offset: int = 0, legend: bool = True) -> None:
    """p50 lines (and bands) of each series; one series: its colour follows the metric."""
    for i, (label, s) in enumerate(series.items()):
        name = " ".join(p for p in (label_prefix, label) if p) or None
        color = f"C{i}" if len(series) > 1 else f"C{color_offset}"
        ax.plot(s["x"], s["p50"] * 1e3, style, marker="o", ms=3, color=color, label=name)
        if band and np.any(s["n"] > 1):
            ax.fill_between(s["x"], s["p1"] * 1e3, s["p99"] * 1e3, color=color, alpha=0.2)
        if s["cats"] is not None:
            ax.set_xticks(range(len(s["cats"])), s["cats"])
    if legend and any(ax.get_legend_handles_labels()[1]):
        ax.legend(fontsize=7, frameon=False)
    ax.grid(alpha=0.3)


def _draw_dropped(ax: Any, rows: list[dict[str, str]], x: str) -> Any:
    """Dropped tokens (p50) on a right-hand axis (returned), when the sweep dropped any."""
    if "dropped_tokens" not in rows[0] or not any(_number(r.get("dropped_tokens")) for r in rows):
        return None
    right = ax.twinx()
    for i, (label, s) in enumerate(sweep_series(rows, x, "dropped_tokens").items()):
        right.plot(s["x"], s["p50"], ":", marker="x", color=f"C{i + 2}",
                   label=" ".join(p for p in ("dropped tokens", label) if p))
    right.set_ylabel("dropped tokens, p50")
    return right
