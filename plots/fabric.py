"""Layered drawing of a fabric graph: one row per node kind, NVSwitches under the GPUs.

Rows from the bottom: nvswitch, gpu, nic, leaf, spine, core. GPUs are ordered by global
index; every other row by the mean position of its neighbours in the rows already placed
(barycentre ordering), so a leaf sits above its NICs. Rows longer than ``max_per_row``
are elided: the first and last ``max_per_row // 2`` GPUs are drawn, and above them the
switches and NICs they reach (see :func:`layout`); a gap in a row marks elided nodes and the
row says how many. Edges are drawn between drawn nodes only, coloured by link tier.
"""

from __future__ import annotations

from itertools import pairwise
from pathlib import Path
from typing import Any

import networkx as nx
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.collections import LineCollection
from matplotlib.figure import Figure

ROWS = ("nvswitch", "gpu", "nic", "leaf", "spine", "core")
ROW_Y = {kind: float(y) for y, kind in enumerate(ROWS)}
NODE_STYLE: dict[str, dict[str, Any]] = {
    "gpu": {"marker": "s", "color": "#2a7f3f"},
    "nvswitch": {"marker": "D", "color": "#7b3294"},
    "nic": {"marker": "o", "color": "#555555"},
    "leaf": {"marker": "^", "color": "#1f5fa8"},
    "spine": {"marker": "^", "color": "#c05a00"},
    "core": {"marker": "^", "color": "#a8001f"},
}
TIER_COLORS = {
    "nvlink": "#7b3294", "pcie": "#999999", "nic": "#1f5fa8",
    "leaf_spine": "#c05a00", "spine_core": "#a8001f",
}
FORMATS = (".png", ".svg", ".pdf")


def _row_order(graph: nx.DiGraph) -> dict[str, list[str]]:
    """Node names per row, GPUs by index, the rest by barycentre of placed neighbours."""
    rows: dict[str, list[str]] = {k: [] for k in ROWS}
    for n, kind in graph.nodes.data("kind"):
        rows.setdefault(kind, []).append(n)
    rows["gpu"].sort(key=lambda n: graph.nodes[n]["gpu"])
    rank = {n: i / max(1, len(rows["gpu"])) for i, n in enumerate(rows["gpu"])}
    for kind in ("nvswitch", "nic", "leaf", "spine", "core"):
        def key(n: str) -> tuple[float, str]:
            placed = [rank[m] for m in graph.successors(n) if m in rank]
            return (sum(placed) / len(placed) if placed else 2.0, n)
        rows[kind].sort(key=key)
        rank.update({n: i / max(1, len(rows[kind])) for i, n in enumerate(rows[kind])})
    return rows


def _cap(nodes: list[str], limit: int) -> list[str]:
    """The first and last ``limit // 2`` of ``nodes`` when there are more than ``limit``."""
    if len(nodes) <= limit:
        return nodes
    keep = max(1, limit // 2)
    return nodes[:keep] + nodes[-keep:]


def layout(graph: nx.DiGraph, max_per_row: int = 64
           ) -> tuple[dict[str, tuple[float, float]], dict[str, int]]:
    """Positions (x in [0, 1], y = row) of the drawn nodes, and elided counts per row.

    Drawn GPUs are the first and last ``max_per_row // 2``; every other row draws the
    nodes next to drawn nodes of the rows below it (capped the same way), so what is
    drawn stays connected.
    """
    rows = _row_order(graph)
    shown: dict[str, list[str]] = {"gpu": _cap(rows["gpu"], max_per_row)}
    drawn = set(shown["gpu"])
    for kind in ("nvswitch", "nic", "leaf", "spine", "core"):
        near = [n for n in rows[kind] if any(m in drawn for m in graph.successors(n))]
        shown[kind] = _cap(near, max_per_row)
        drawn.update(shown[kind])
    pos: dict[str, tuple[float, float]] = {}
    elided: dict[str, int] = {}
    for kind, nodes in shown.items():
        index = {n: i for i, n in enumerate(rows[kind])}
        slots = [1] if nodes else []
        for prev, n in pairwise(nodes):
            slots.append(slots[-1] + (2 if index[n] > index[prev] + 1 else 1))
        width = (slots[-1] if slots else 0) + 1
        pos.update({n: (s / width, ROW_Y[kind]) for n, s in zip(nodes, slots, strict=True)})
        if len(rows[kind]) > len(nodes):
            elided[kind] = len(rows[kind]) - len(nodes)
    return pos, elided


def draw_fabric(graph: nx.DiGraph, path: str | Path, max_per_row: int = 64,
                title: str | None = None) -> Path:
    """Draw ``graph`` to ``path`` (.png, .svg or .pdf, chosen by extension)."""
    out = Path(path)
    if out.suffix.lower() not in FORMATS:
        raise ValueError(f"path: unsupported extension {out.suffix!r}; allowed: "
                         f"{', '.join(FORMATS)}")
    pos, elided = layout(graph, max_per_row)
    shown = max(sum(1 for x in pos.values() if x[1] == y) for y in ROW_Y.values())
    fig = Figure(figsize=(min(28.0, 5.0 + 0.16 * shown), 6.5))
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    _draw_edges(ax, graph, pos)
    _draw_nodes(ax, graph, pos, elided)
    g = graph.graph
    ax.set_title(title or f"{g.get('name')} ({g.get('family')}, {g.get('fabric')}): "
                 f"{sum(1 for _, k in graph.nodes.data('kind') if k == 'gpu')} GPUs, "
                 f"NVLink domain {g.get('nvlink_domain_size')}")
    ax.set_yticks(list(ROW_Y.values()), list(ROW_Y))
    ax.set_xticks([])
    ax.set_xlim(-0.02, 1.02)
    ax.set_ylim(-0.6, len(ROWS) - 0.4)
    for side in ("top", "right", "bottom"):
        ax.spines[side].set_visible(False)
    ax.legend(loc="upper left", fontsize=7, frameon=False, ncols=5,
              bbox_to_anchor=(0.0, -0.02))
    fig.tight_layout()
    fig.savefig(out)
    return out


def _draw_edges(ax: Any, graph: nx.DiGraph, pos: dict[str, tuple[float, float]]) -> None:
    segments: dict[str, list[tuple[tuple[float, float], tuple[float, float]]]] = {}
    for u, v, tier in graph.edges.data("tier"):
        if u < v and u in pos and v in pos:
            segments.setdefault(tier, []).append((pos[u], pos[v]))
    for tier, segs in segments.items():
        alpha = max(0.08, min(0.8, 30.0 / len(segs)))
        ax.add_collection(LineCollection(segs, colors=TIER_COLORS.get(tier, "#000000"),
                                         linewidths=0.6, alpha=alpha, label=tier))


def _draw_nodes(ax: Any, graph: nx.DiGraph, pos: dict[str, tuple[float, float]],
                elided: dict[str, int]) -> None:
    by_kind: dict[str, list[str]] = {}
    for n in pos:
        by_kind.setdefault(graph.nodes[n]["kind"], []).append(n)
    for kind, nodes in by_kind.items():
        xs, ys = [pos[n][0] for n in nodes], [pos[n][1] for n in nodes]
        style = NODE_STYLE.get(kind, {"marker": "o", "color": "black"})
        ax.scatter(xs, ys, s=18 if len(nodes) < 48 else 8, zorder=3, **style)
        if len(nodes) <= 24:
            for n in nodes:
                ax.annotate(n, pos[n], xytext=(0, 6), textcoords="offset points",
                            fontsize=6, ha="center", rotation=30)
    for kind, count in elided.items():
        ax.annotate(f"(+{count} not drawn)", (1.0, ROW_Y[kind]), xytext=(0, -11),
                    textcoords="offset points", fontsize=7, ha="right", color="black")
