"""Figures from saved files: every kind writes PNG and SVG; the data they draw is right."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner

from moesim.cli.plot import KINDS, draw, plot
from moesim.plots.congestion import link_rows
from moesim.plots.stragglers import straggler_rows
from moesim.plots.sweep import axis_columns, sweep_series
from moesim.plots.timeline import kind_of

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _run_record() -> dict[str, Any]:
    """A hand-made saved run: 2 ranks, 3 phases, 3 links in two tiers."""
    return {
        "format": "moesim-run/1", "scenario": "tiny", "seed": 0, "step_time_s": 0.004,
        "balanced_step_time_s": 0.003, "uncongested_step_time_s": 0.0035,
        "tokens_per_s": 1.0, "dropped_tokens": 0,
        "breakdown_s": {"other_compute": 0.001, "a2a": 0.002, "experts": 0.001},
        "stragglers": [
            {"rank": 1, "cause": "expert_imbalance", "excess_s": 0.001, "detail": "hot",
             "link": None, "phases": 1},
            {"rank": 0, "cause": "link_congestion", "excess_s": 0.0005, "detail": "busy",
             "link": "leaf.r0->spine.0", "phases": 1},
        ],
        "ranks": [{"rank": 0, "gpu": "h0/gpu0"}, {"rank": 1, "gpu": "h1/gpu0"}],
        "phases": [
            {"index": 0, "layer": 0, "name": "attn", "label": "L0.attn", "a2a": False,
             "critical_rank": 0},
            {"index": 1, "layer": 0, "name": "dispatch", "label": "L0.dispatch", "a2a": True,
             "critical_rank": 1},
            {"index": 2, "layer": 0, "name": "experts", "label": "L0.experts", "a2a": False,
             "critical_rank": 1},
        ],
        "start_s": [[0.0, 0.0], [0.001, 0.001], [0.002, 0.003]],
        "end_s": [[0.001, 0.001], [0.002, 0.003], [0.003, 0.004]],
        "links": {
            "id": ["leaf.r0->spine.0", "h0/nic0->leaf.r0", "h1/nic0->leaf.r0"],
            "tier": ["leaf_spine", "nic", "nic"],
            "bytes": [10.0, 5.0, 20.0],
            "times_s": [0.0, 0.001, 0.002],
            "util": [[0.0, 0.0, 0.0], [1.0, 0.5, 0.8], [0.0, 0.0, 0.0]],
        },
    }


SWEEP_ROWS = [  # router.alpha x seed, one failed point; no excess or straggler columns
    {"point_id": "a", "router.alpha": "0", "seed": "1", "step_time_s": "0.10", "error": ""},
    {"point_id": "b", "router.alpha": "0", "seed": "2", "step_time_s": "0.12", "error": ""},
    {"point_id": "c", "router.alpha": "0", "seed": "3", "step_time_s": "0.14", "error": ""},
    {"point_id": "d", "router.alpha": "1", "seed": "1", "step_time_s": "0.20", "error": ""},
    {"point_id": "e", "router.alpha": "1", "seed": "2", "step_time_s": "", "error": "Boom: x"},
]


@pytest.fixture(scope="module")
def saved(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("saved")
    run = root / "tiny.run.json"
    run.write_text(json.dumps(_run_record()))
    result = root / "other.result.json"  # a result record (no spans) also has these keys
    result.write_text(json.dumps({"scenario": "other", "step_time_s": 0.005,
                                  "breakdown_s": {"a2a": 0.004, "experts": 0.001},
                                  "stragglers": []}))
    sweep = root / "alpha.csv"
    with sweep.open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(SWEEP_ROWS[0]))
        writer.writeheader()
        writer.writerows(SWEEP_ROWS)
    full = root / "full.csv"  # every column the sweep runner writes, two series
    with full.open("w", newline="") as fh:
        cols = ["point_id", "router.alpha", "fabric.multipath", "seed", "step_time_s",
                "imbalance_excess_s", "congestion_excess_s", "dropped_tokens", "straggler_cause",
                "error"]
        rows = csv.writer(fh)
        rows.writerow(cols)
        for i, (alpha, mp, seed) in enumerate([(0, "ecmp", 1), (0, "ecmp", 2), (1, "ecmp", 1),
                                               (0, "spray", 1), (1, "spray", 1)]):
            rows.writerow([i, alpha, mp, seed, 0.1 + alpha * 0.05, alpha * 0.04, 0.01, alpha * 9,
                           "", ""])
    return {"run": run, "result": result, "sweep": sweep, "full": full}


INPUTS = {
    "congestion": ("run",), "timeline": ("run",), "breakdown": ("run", "result"),
    "stragglers": ("run", "result"), "sweep": ("sweep",),
}


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("ext", [".png", ".svg"])
def test_each_kind_writes_png_and_svg(kind: str, ext: str, saved: dict[str, Path],
                                      tmp_path: Path) -> None:
    out = tmp_path / f"{kind}{ext}"
    result = CliRunner().invoke(plot, [kind, *(str(saved[k]) for k in INPUTS[kind]),
                                       "-o", str(out)])
    assert result.exit_code == 0, result.output
    data = out.read_bytes()
    if ext == ".png":
        assert data[:8] == PNG_MAGIC and len(data) > 5000
    else:
        assert b"<svg" in data[:2000]


def test_sweep_plot_with_every_column_and_a_text_axis(saved: dict[str, Path],
                                                      tmp_path: Path) -> None:
    for x in ("router.alpha", "fabric.multipath"):
        out = draw("sweep", (str(saved["full"]),), str(tmp_path / "s.png"), x=x)
        assert out.read_bytes()[:8] == PNG_MAGIC


def test_sweep_series_take_percentiles_over_seeds() -> None:
    assert axis_columns(list(SWEEP_ROWS[0])) == ["router.alpha", "seed"]
    series = sweep_series(SWEEP_ROWS, "router.alpha", "step_time_s")
    assert list(series) == [""]  # one series: no other axis
    s = series[""]
    assert s["x"].tolist() == [0.0, 1.0]
    assert s["n"].tolist() == [3, 1]  # the failed point is skipped
    assert s["p50"] == pytest.approx([0.12, 0.20])
    assert s["p1"][0] == pytest.approx(0.1 + 0.04 * 0.01)  # linear interpolation, 3 seeds
    assert s["p99"][0] == pytest.approx(0.14 - 0.04 * 0.01)
    assert s["cats"] is None


def test_the_fingerprint_is_no_axis_nor_a_series_label() -> None:
    """A sweep's rows carry a hash of what computed them; figures name series by axes only."""
    rows = [{**r, "fingerprint": "011c13a9570b"} for r in SWEEP_ROWS]
    assert axis_columns(list(rows[0])) == ["router.alpha", "seed"]
    assert list(sweep_series(rows, "router.alpha", "step_time_s")) == [""]


def test_congestion_rows_group_by_tier_busiest_first() -> None:
    run = _run_record()
    assert link_rows(run, 10) == [2, 1, 0]  # nic tier first (busiest first), then leaf_spine
    assert link_rows(run, 2) == [2, 0]  # one per tier at least


def test_straggler_rows_are_sorted_by_excess() -> None:
    rows = straggler_rows([_run_record()], top=5)
    assert rows == [("rank 1  expert_imbalance", "expert_imbalance", 0.001),
                    ("rank 0  link_congestion  leaf.r0->spine.0", "link_congestion", 0.0005)]
    assert kind_of("combine_bwd") == "all-to-all" and kind_of("experts_bwd") == "experts"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["congestion", "{run}", "-o", "{tmp}/f.gif"], "unsupported extension '.gif'"),
        (["timeline", "{run}", "{run}", "-o", "{tmp}/f.png"], "timeline draws one file"),
        (["sweep", "{sweep}", "--x", "nope", "-o", "{tmp}/f.png"], "x: unknown column 'nope'"),
        (["congestion", "{result}", "-o", "{tmp}/f.png"], "is not a saved run"),
        (["sweep", "{run}", "-o", "{tmp}/f.png"], "results:"),
    ],
)
def test_bad_input_is_one_line_and_status_2(args: list[str], message: str,
                                            saved: dict[str, Path], tmp_path: Path) -> None:
    filled = [a.format(tmp=tmp_path, **{k: str(v) for k, v in saved.items()}) for a in args]
    result = CliRunner().invoke(plot, filled)
    assert result.exit_code == 2
    assert message in result.output


def test_breakdown_heights_are_the_saved_values(saved: dict[str, Path], tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    from moesim.plots import breakdown

    captured: dict[str, Any] = {}
    real = breakdown.save

    def keep(fig: Any, path: Any) -> Path:
        captured["fig"] = fig
        return real(fig, path)

    monkeypatch.setattr(breakdown, "save", keep)
    breakdown.draw_breakdown([saved["run"], saved["result"]], tmp_path / "b.png")
    ax = captured["fig"].axes[0]
    heights = np.array([p.get_height() for p in ax.patches]).reshape(-1, 2)
    # parts in first-seen order: other_compute, a2a, experts; bars: tiny, other (ms)
    assert np.allclose(heights, [[1.0, 0.0], [2.0, 4.0], [1.0, 1.0]])
