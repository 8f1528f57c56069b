"""Design figure: the simulated step breakdown of each simulated candidate, from the saved
design record (``moesim design --out report.md`` writes ``report.json`` and this PNG beside
it). The chosen layout is the first bar; a tick marks each candidate's estimate."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from moesim.plots.common import new_figure, save

PARTS = ("compute", "a2a_exposed", "tp_exposed", "cp_exposed", "bubble", "dp_exposed",
         "optimizer")
MAX_BARS = 16


def draw_design(record: dict[str, Any], out: str | Path) -> Path:
    """Stacked bars of ``candidates[].simulated_breakdown_s`` (seconds per step)."""
    cands = [c for c in record.get("candidates", []) if c.get("simulated_step_s")][:MAX_BARS]
    fig = new_figure(max(6.0, 1.8 + 0.7 * len(cands)), 5.0)
    ax = fig.add_subplot()
    x = np.arange(len(cands))
    bottom = np.zeros(len(cands))
    for i, part in enumerate(PARTS):
        h = np.array([float((c.get("simulated_breakdown_s") or {}).get(part, 0.0))
                      for c in cands])
        if h.any():
            ax.bar(x, h, 0.65, bottom=bottom, label=part, color=f"C{i}")
            bottom += h
    est = [float(c["estimate_step_s"]) for c in cands]
    ax.scatter(x, est, marker="_", s=300, color="black", label="estimate", zorder=3)
    labels = ["\n".join(f"{k}{v}" for k, v in c["layout"].items()
                         if k != "etp" and not (k in ("vpp", "cp") and v == 1))
              for c in cands]
    ax.set_xticks(x, labels, fontsize=7)
    ax.set_ylabel("seconds per step")
    ax.set_title(f"{record.get('model')} on {record.get('chosen_gpus')} x {record.get('gpu')}: "
                 "simulated step by part (chosen first)", fontsize=10)
    ax.legend(fontsize=7, ncols=4, loc="upper left")
    return save(fig, out)
