"""Congestion timeline: a links x time heatmap of utilisation, links grouped by tier.

Rows are the links that carried bytes (from a saved run), grouped by tier (NVLink at the
bottom up to the core), busiest first within a tier; at most ``max_links`` rows (the busiest
per tier, shared out in proportion). Columns are the run's samples, each holding until
the next one, so the time axis is exact, not binned.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from moesim.plots.common import TIER_COLORS, TIER_ORDER, load_run, ms_array, new_figure, save


def _tier_key(tier: str) -> int:
    return TIER_ORDER.index(tier) if tier in TIER_ORDER else len(TIER_ORDER)


def link_rows(run: dict[str, Any], max_links: int) -> list[int]:
    """Indices (into run["links"]) of the rows drawn, grouped by tier, busiest first."""
    links = run["links"]
    moved = np.asarray(links["bytes"], dtype=float)
    tiers = links["tier"]
    order = sorted(range(len(tiers)), key=lambda i: (_tier_key(tiers[i]), -moved[i], i))
    if len(order) <= max_links:
        return order
    keep: list[int] = []
    for tier in sorted(set(tiers), key=_tier_key):
        members = [i for i in order if tiers[i] == tier]
        quota = max(1, round(max_links * len(members) / len(order)))
        keep += members[:quota]
    return sorted(keep, key=order.index)


def draw_congestion(run_path: str | Path, out: str | Path, max_links: int = 160) -> Path:
    """Draw the congestion heatmap of the saved run at ``run_path`` to ``out``."""
    run = load_run(run_path)
    links = run["links"]
    times = np.asarray(links["times_s"], dtype=float)
    rows = link_rows(run, max_links)
    fig = new_figure(11.0, min(9.0, 2.5 + 0.04 * max(len(rows), 20)))
    ax = fig.add_subplot()
    ax.set_title(f"{run['scenario']}: link utilisation ({len(rows)} of "
                 f"{len(links['id'])} used links)")
    ax.set_xlabel("time (ms)")
    if not rows or times.size == 0:
        ax.text(0.5, 0.5, "no link carried bytes", ha="center", transform=ax.transAxes)
        return save(fig, out)
    util = np.asarray(links["util"], dtype=float)[:, rows].T
    edges = ms_array(np.append(times, max(run["step_time_s"], times[-1])))
    mesh = ax.pcolormesh(edges, np.arange(len(rows) + 1), util, cmap="inferno",
                         vmin=0.0, vmax=max(1.0, float(util.max())), shading="flat")
    ax.set_xlim(0.0, edges[-1])
    fig.colorbar(mesh, ax=ax, label="utilisation (load / achievable capacity)", pad=0.04)
    _label_tiers(ax, [links["tier"][i] for i in rows], [links["id"][i] for i in rows])
    return save(fig, out)


def _label_tiers(ax: Any, tiers: list[str], names: list[str]) -> None:
    """Tier bands on the y axis; link names too when there are few rows."""
    starts = [0] + [i for i in range(1, len(tiers)) if tiers[i] != tiers[i - 1]]
    for start, end in zip(starts, [*starts[1:], len(tiers)], strict=True):
        ax.axhline(start, color="white", linewidth=1.2)
        ax.text(1.01, (start + end) / 2, tiers[start], transform=ax.get_yaxis_transform(),
                ha="left", va="center", fontsize=8, color=TIER_COLORS.get(tiers[start], "k"),
                fontweight="bold", rotation=90)
    if len(names) <= 40:
        ax.set_yticks(np.arange(len(names)) + 0.5, names, fontsize=6)
        ax.set_ylabel("link")
    else:
        ax.set_yticks([])
        ax.set_ylabel("links, grouped by tier (right)")
