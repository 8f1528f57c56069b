"""What every figure shares: reading saved files, a blank figure, saving by extension.

Figures read only saved files: run records (``moesim.results.timeline.save_run``), result
records (``moesim run --out``) and sweep CSVs. Nothing here touches live simulator objects.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from moesim.errors import ConfigError

FORMATS = (".png", ".svg")
RUN_FORMAT = "moesim-run/1"
TIER_ORDER = ("nvlink", "pcie", "nic", "leaf_spine", "spine_core")
TIER_COLORS = {
    "nvlink": "#7b3294", "pcie": "#999999", "nic": "#1f5fa8",
    "leaf_spine": "#c05a00", "spine_core": "#a8001f",
}
CAUSE_COLORS = {
    "expert_imbalance": "#d95f02", "link_congestion": "#1f5fa8", "slow_gpu": "#7570b3",
}


def load_json(path: str | Path) -> dict[str, Any]:
    """A saved run or result record."""
    p = Path(path)
    try:
        data = json.loads(p.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise ConfigError("results", f"cannot read {p}: {exc}") from exc
    if not isinstance(data, dict):
        raise ConfigError("results", f"{p} is not a JSON object (a run or result record)")
    return data


def load_run(path: str | Path) -> dict[str, Any]:
    """A saved run record (has spans and the link timeline)."""
    data = load_json(path)
    if data.get("format") != RUN_FORMAT:
        raise ConfigError(
            "results", f"{path} is not a saved run ({RUN_FORMAT}); write one with save_run "
            "or `moesim run --save-run FILE`"
        )
    return data


def load_csv(path: str | Path) -> list[dict[str, str]]:
    """Rows of a sweep CSV as dicts of strings."""
    p = Path(path)
    try:
        with p.open(newline="") as fh:
            return list(csv.DictReader(fh))
    except OSError as exc:
        raise ConfigError("results", f"cannot read {p}: {exc}") from exc


def new_figure(width_in: float, height_in: float) -> Figure:
    fig = Figure(figsize=(width_in, height_in))
    FigureCanvasAgg(fig)
    return fig


def check_output(path: str | Path) -> Path:
    out = Path(path)
    if out.suffix.lower() not in FORMATS:
        raise ConfigError(
            "output", f"unsupported extension {out.suffix!r}; allowed: {', '.join(FORMATS)}"
        )
    return out


def save(fig: Figure, path: str | Path) -> Path:
    """Save ``fig`` as PNG or SVG by the extension of ``path``."""
    out = check_output(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=130, bbox_inches="tight")
    return out


def ms(t_s: float) -> float:
    """Seconds to milliseconds (a number)."""
    return t_s * 1e3


def ms_array(t_s: Any) -> np.ndarray:
    """Seconds to milliseconds (an array)."""
    return np.asarray(t_s, dtype=float) * 1e3
