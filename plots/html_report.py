"""A design report a colleague can open offline: one HTML file, figures embedded.

Rendered from the design JSON record (:func:`moesim.plan.record.to_record`), generically so that
fields added to the record show up without a change here:

* scalars -> a key/value table ("summary"); nested mappings -> their own key/value tables;
* lists of mappings (candidates, placements, rejected layouts ...) -> tables, one column per key
  (the union, in first-seen order), nested values written compactly;
* figures: the simulated step breakdown of the candidates (:func:`moesim.plots.design.draw_design`)
  as a base64 PNG and the layout comparison (estimate against simulated step time) as inline
  SVG; the Markdown report's text, when given, under them.

No scripts, fonts or styles from the network: the file is complete as written.
"""

from __future__ import annotations

import base64
import html
import io
import json
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from moesim.plots.common import new_figure
from moesim.plots.design import draw_design

STYLE = """body{font-family:sans-serif;max-width:1200px;margin:2em auto;color:#222}
table{border-collapse:collapse;margin:.5em 0 1.5em;font-size:13px}
td,th{border:1px solid #ccc;padding:3px 6px;text-align:left;vertical-align:top}
th{background:#f0f0f0}.num{text-align:right;font-variant-numeric:tabular-nums}
figure{margin:1em 0}img,svg{max-width:100%;height:auto}pre{background:#f7f7f7;padding:1em;
overflow-x:auto;font-size:12px}"""
MAX_ROWS = 200


def _cell(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.6g}"
    if isinstance(value, dict | list):
        return html.escape(json.dumps(value, separators=(", ", ": "), default=str))
    return html.escape("" if value is None else str(value))


def _num(value: Any) -> str:
    return ' class="num"' if isinstance(value, int | float) and not isinstance(value, bool) else ""


def kv_table(data: dict[str, Any]) -> str:
    """A two-column table of ``data``."""
    rows = "".join(f"<tr><th>{html.escape(k)}</th><td{_num(v)}>{_cell(v)}</td></tr>"
                   for k, v in data.items())
    return f"<table>{rows}</table>"


def list_table(rows: list[dict[str, Any]]) -> str:
    """A table with one row per mapping and one column per key (union, first-seen order)."""
    cols: list[str] = []
    for r in rows:
        cols += [k for k in r if k not in cols]
    head = "".join(f"<th>{html.escape(c)}</th>" for c in cols)
    body = "".join("<tr>" + "".join(f"<td{_num(r.get(c))}>{_cell(r.get(c))}</td>" for c in cols)
                   + "</tr>" for r in rows[:MAX_ROWS])
    more = (f"<p>{len(rows) - MAX_ROWS} more rows in the JSON record.</p>"
            if len(rows) > MAX_ROWS else "")
    return f"<table><tr>{head}</tr>{body}</table>{more}"


def sections(record: dict[str, Any]) -> str:
    """Every field of ``record``: scalars in one summary table, the rest a section each."""
    scalars = {k: v for k, v in record.items() if not isinstance(v, dict | list)}
    parts = ["<h2>Summary</h2>", kv_table(scalars)]
    for key, value in record.items():
        if isinstance(value, dict):
            parts += [f"<h2>{html.escape(key)}</h2>", kv_table(value)]
        elif isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
            parts += [f"<h2>{html.escape(key)} ({len(value)})</h2>", list_table(value)]
        elif isinstance(value, list):
            parts += [f"<h2>{html.escape(key)}</h2>", f"<p>{_cell(value)}</p>"]
    return "\n".join(parts)


def breakdown_png(record: dict[str, Any]) -> str:
    """The design breakdown figure as a data URI (PNG)."""
    with tempfile.TemporaryDirectory() as tmp:
        path = draw_design(record, Path(tmp) / "breakdown.png")
        data = Path(path).read_bytes()
    return "data:image/png;base64," + base64.b64encode(data).decode()


def comparison_svg(record: dict[str, Any]) -> str:
    """Estimate against simulated step time of every simulated candidate (inline SVG)."""
    cands = [c for c in record.get("candidates", []) if c.get("simulated_step_s")]
    fig = new_figure(6.0, 4.0)
    ax = fig.add_subplot()
    est = np.array([float(c["estimate_step_s"]) for c in cands])
    sim = np.array([float(c["simulated_step_s"]) for c in cands])
    ax.scatter(est, sim, s=18, label="simulated candidates")
    if cands:
        ax.scatter(est[:1], sim[:1], s=60, marker="*", color="C3", label="chosen", zorder=3)
        top = float(max(est.max(), sim.max())) * 1.05
        ax.plot([0, top], [0, top], color="gray", lw=0.8, label="estimate = simulated")
    ax.set_xlabel("estimated step time (s)")
    ax.set_ylabel("simulated step time (s)")
    ax.set_title("layout comparison: estimate vs simulation", fontsize=10)
    ax.legend(fontsize=8)
    buf = io.StringIO()
    fig.savefig(buf, format="svg")
    svg = buf.getvalue()
    return svg[svg.index("<svg"):]


def to_html(record: dict[str, Any], markdown: str = "") -> str:
    """The whole report as one HTML document."""
    title = (f"moesim design: {record.get('model', '')} on {record.get('chosen_gpus', '')} x "
             f"{record.get('gpu', '')}")
    figs = (f'<figure><img alt="simulated step breakdown" src="{breakdown_png(record)}">'
            "<figcaption>Simulated step by part, chosen layout first (tick: estimate)"
            "</figcaption></figure>"
            f'<figure id="comparison">{comparison_svg(record)}<figcaption>Layout comparison'
            "</figcaption></figure>")
    text = f"<h2>Report</h2><pre>{html.escape(markdown)}</pre>" if markdown else ""
    return (f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>'
            f"{html.escape(title)}</title><style>{STYLE}</style></head><body>"
            f"<h1>{html.escape(title)}</h1><h2>Figures</h2>{figs}{text}{sections(record)}"
            "</body></html>\n")


def write_html_report(record: dict[str, Any], out: str | Path, markdown: str = "") -> Path:
    """Write :func:`to_html` to ``out``; the path."""
    path = Path(out)
    path.write_text(to_html(record, markdown), encoding="utf-8")
    return path
