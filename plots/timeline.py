"""Per-rank timeline of one step (a Gantt chart): compute phases vs all-to-all phases.

One row per EP rank; spans coloured by kind (attention, router/unpermute, expert GEMMs,
all-to-all); the span of the rank that finished each phase last (the critical one) is
outlined in black. Reads a saved run only.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
from matplotlib.patches import Patch

from moesim.plots.common import load_run, ms, ms_array, new_figure, save

KINDS = {
    "attention": ("#8da0cb", ("attn", "attn_bwd")),
    "router / unpermute": ("#b3b3b3", ("router", "unpermute")),
    "experts": ("#fc8d62", ("experts", "experts_bwd")),
    "all-to-all": ("#1f5fa8", ("dispatch", "combine", "combine_bwd", "dispatch_bwd")),
}
KIND_OF = {name: kind for kind, (_, names) in KINDS.items() for name in names}


def kind_of(phase_name: str) -> str:
    return KIND_OF.get(phase_name, "router / unpermute")


def draw_timeline(run_path: str | Path, out: str | Path, max_ranks: int = 64) -> Path:
    """Draw the per-rank Gantt of the saved run at ``run_path`` to ``out``."""
    run = load_run(run_path)
    start = ms_array(run["start_s"])
    end = ms_array(run["end_s"])
    n_ranks = min(start.shape[1], max_ranks)
    fig = new_figure(12.0, min(10.0, 1.8 + 0.28 * n_ranks))
    ax = fig.add_subplot()
    _draw_spans(ax, run["phases"], start[:, :n_ranks], end[:, :n_ranks])
    names = [f"{r['rank']} ({r['gpu']})" for r in run["ranks"][:n_ranks]]
    ax.set_yticks(np.arange(n_ranks), names, fontsize=7 if n_ranks <= 32 else 5)
    ax.set_ylim(n_ranks - 0.5, -0.5)
    ax.set_xlim(0.0, ms(run["step_time_s"]))
    ax.set_xlabel("time (ms)")
    shown = "" if n_ranks == start.shape[1] else f" (first {n_ranks} of {start.shape[1]} ranks)"
    ax.set_title(f"{run['scenario']}: one step per rank, "
                 f"{ms(run['step_time_s']):.2f} ms{shown}")
    handles = [Patch(color=c, label=k) for k, (c, _) in KINDS.items()]
    handles.append(Patch(facecolor="none", edgecolor="black", label="finished phase last"))
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.005, 1.0), fontsize=8,
              frameon=False)
    return save(fig, out)


def _draw_spans(ax: Any, phases: list[dict[str, Any]], start: np.ndarray, end: np.ndarray
                ) -> None:
    """One broken_barh per (rank, kind), and one per rank for the critical outlines."""
    kinds = np.array([kind_of(ph["name"]) for ph in phases])
    critical = np.array([ph["critical_rank"] for ph in phases])
    for rank in range(start.shape[1]):
        bars = np.stack([start[:, rank], end[:, rank] - start[:, rank]], axis=1)
        for kind, (color, _) in KINDS.items():
            ax.broken_barh(bars[kinds == kind].tolist(), (rank - 0.4, 0.8), facecolors=color)
        if np.any(critical == rank):
            ax.broken_barh(bars[critical == rank].tolist(), (rank - 0.4, 0.8),
                           facecolors="none", edgecolors="black", linewidth=0.9)
