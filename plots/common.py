"""What every figure shares: reading saved files, a blank figure, saving by extension.

Figures read only saved files: run records (``moesim.results.timeline.save_run``), result
records (``moesim run --out``) and sweep CSVs. Nothing here touches live simulator objects.
"""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from moesim.errors import ConfigError
from moesim.io import load_json_text, read_text, short

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


RECORD_BYTES = 1 << 28
"""Size bound of a saved run record: larger than a user's input file (moesim.io's file_bytes,
1 MiB), since moesim writes these itself with every span and link sample (the 32-rank
gallery fault case: 2.0 MB); 256 MiB keeps a stray file from filling memory."""


def load_json(path: str | Path) -> dict[str, Any]:
    """A saved run or result record (UTF-8 JSON, depth-limited, at most RECORD_BYTES)."""
    data = load_json_text(read_text(path, "results", max_bytes=RECORD_BYTES), "results",
                          short(str(path)))
    if not isinstance(data, dict):
        raise ConfigError("results", f"{short(str(path))} is not a JSON object (a run or "
                          "result record)")
    return data


def load_record(path: str | Path) -> dict[str, Any]:
    """A saved run or result record whose step time, breakdown and stragglers a figure reads:
    anything of another shape is one ConfigError naming the file, not a KeyError later."""
    data = load_json(path)
    bad = f"{short(str(path))} is not a run or result record"
    if not _number(data.get("step_time_s")):
        raise ConfigError("results", f"{bad} (no step_time_s)")
    parts = data.get("breakdown_s", {})
    if not isinstance(parts, dict) or not all(_number(v) for v in parts.values()):
        raise ConfigError("results", f"{bad} (breakdown_s must map parts to seconds)")
    stragglers = data.get("stragglers", [])
    if not isinstance(stragglers, list) or not all(
            isinstance(s, dict) and {"rank", "cause"} <= set(s) and _number(s.get("excess_s"))
            for s in stragglers):
        raise ConfigError("results", f"{bad} (stragglers must be records with rank, cause "
                          "and excess_s)")
    return data


def _number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def load_run(path: str | Path) -> dict[str, Any]:
    """A saved run record (has spans and the link timeline)."""
    data = load_json(path)
    if data.get("format") != RUN_FORMAT:
        raise ConfigError(
            "results", f"{path} is not a saved run ({RUN_FORMAT}, group mode); write one "
            "with `moesim run SCENARIO --mode group --save-run FILE`"
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


def check_output(path: str | Path, field: str = "output") -> Path:
    out = Path(path)
    if out.suffix.lower() not in FORMATS:
        raise ConfigError(
            field, f"unsupported extension {out.suffix!r}; allowed: {', '.join(FORMATS)}"
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
