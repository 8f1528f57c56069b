"""Straggler attribution: horizontal bars of ``excess_s`` by cause, rank and link.

Each bar is one straggler of a saved run or result record: its excess over the
counterfactual without its cause, labelled ``rank R  cause  [link]`` and coloured by
cause. With several files the label is prefixed with the scenario.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from matplotlib.patches import Patch

from moesim.plots.common import CAUSE_COLORS, load_record, ms, new_figure, save


def straggler_rows(records: Sequence[dict[str, Any]], top: int) -> list[tuple[str, str, float]]:
    """(label, cause, excess_s) of the ``top`` largest stragglers over ``records``."""
    rows = []
    for rec in records:
        prefix = f"{rec.get('scenario', '?')}: " if len(records) > 1 else ""
        for s in rec.get("stragglers", []):
            link = f"  {s['link']}" if s.get("link") else ""
            label = f"{prefix}rank {s['rank']}  {s['cause']}{link}"
            rows.append((label, str(s["cause"]), float(s["excess_s"])))
    rows.sort(key=lambda r: -r[2])
    return rows[:top]


def draw_stragglers(paths: Sequence[str | Path], out: str | Path, top: int = 15) -> Path:
    """Draw the straggler bars of the saved files in ``paths`` to ``out``."""
    records = [load_record(p) for p in paths]
    rows = straggler_rows(records, top)
    fig = new_figure(9.0, 1.6 + 0.32 * max(len(rows), 3))
    ax = fig.add_subplot()
    names = ", ".join(dict.fromkeys(str(r.get("scenario", "?")) for r in records))
    ax.set_title(f"{names}: straggler attribution (excess over the counterfactual)")
    if not rows:
        ax.text(0.5, 0.5, "no stragglers: the step is within tolerance of both counterfactuals",
                ha="center", va="center", transform=ax.transAxes)
        ax.set_xticks([])
        ax.set_yticks([])
        return save(fig, out)
    y = np.arange(len(rows))
    ax.barh(y, [ms(r[2]) for r in rows], color=[CAUSE_COLORS.get(r[1], "gray") for r in rows])
    ax.set_yticks(y, [r[0] for r in rows], fontsize=8)
    ax.set_ylim(len(rows) - 0.5, -0.5)
    ax.set_xlabel("excess (ms)")
    causes = dict.fromkeys(r[1] for r in rows)
    ax.legend(handles=[Patch(color=CAUSE_COLORS.get(c, "gray"), label=c) for c in causes],
              fontsize=8, frameon=False, loc="lower right")
    return save(fig, out)
