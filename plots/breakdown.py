"""Step breakdown: stacked bars of ``breakdown_s`` (where the step went), one bar per file.

Accepts saved runs and result records alike (both carry ``breakdown_s``); a bar is
labelled with its scenario (and the file stem when two bars share a scenario).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from moesim.plots.common import load_record, ms, new_figure, save

PART_COLORS = {"experts": "#fc8d62", "a2a": "#1f5fa8", "other_compute": "#8da0cb"}


def draw_breakdown(paths: Sequence[str | Path], out: str | Path) -> Path:
    """Draw the stacked step breakdown of each saved file in ``paths`` to ``out``."""
    records = [load_record(p) for p in paths]
    labels = [str(r.get("scenario", Path(p).stem)) for r, p in zip(records, paths, strict=True)]
    if len(set(labels)) < len(labels):
        labels = [f"{lab}\n{Path(p).stem}" for lab, p in zip(labels, paths, strict=True)]
    parts: list[str] = []
    for r in records:
        parts += [k for k in r.get("breakdown_s", {}) if k not in parts]
    fig = new_figure(max(5.0, 1.6 + 1.3 * len(records)), 4.8)
    ax = fig.add_subplot()
    x = np.arange(len(records))
    bottom = np.zeros(len(records))
    for i, part in enumerate(parts):
        height = np.array([ms(float(r.get("breakdown_s", {}).get(part, 0.0))) for r in records])
        ax.bar(x, height, 0.6, bottom=bottom, label=part,
               color=PART_COLORS.get(part, f"C{i}"))
        bottom += height
    for xi, r in zip(x, records, strict=True):
        if "step_time_s" in r:
            ax.plot([xi - 0.35, xi + 0.35], [ms(r["step_time_s"])] * 2, color="black", lw=1.2)
    ax.plot([], [], color="black", lw=1.2, label="step time")
    ax.set_xticks(x, labels, fontsize=8, rotation=20 if len(records) > 3 else 0, ha="right"
                  if len(records) > 3 else "center")
    ax.set_ylabel("step time by phase kind (ms)")
    ax.set_title("where the step went")
    ax.legend(fontsize=8, frameon=False, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    return save(fig, out)
