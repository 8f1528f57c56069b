"""The gallery: ``moesim gallery`` runs a case and saves it; plots/gallery draws from files."""

from __future__ import annotations

import shutil
from pathlib import Path

from moesim.cli.gallery import build_gallery
from moesim.plots.gallery import draw_gallery
from moesim.runner.run import run_scenario
from moesim.scenario import load_scenario_file
from moesim.scenarios import resolve

FAULT_CASE = "ep32-rail-1to1-slow-gpu-degraded-link"
DEGRADED_LINK = ("leaf.r3.su0", "spine.0")


def test_gallery_draws_a_case(tmp_path: Path) -> None:
    lines: list[str] = []
    figures = build_gallery(tmp_path, cases=("ep8-hot-expert",), sweeps=False, log=lines.append)
    assert [p.name for p in figures] == [
        "breakdown.png", "ep8-hot-expert-congestion.png", "ep8-hot-expert-stragglers.png",
        "ep8-hot-expert-timeline.png",
    ]
    assert all(p.stat().st_size > 5000 for p in figures)
    assert (tmp_path / "runs" / "ep8-hot-expert.run.json").is_file()
    assert (tmp_path / "runs" / "ep8-hot-expert.result.json").is_file()
    index = (tmp_path / "README.md").read_text()
    assert "![ep8-hot-expert timeline](ep8-hot-expert-timeline.png)" in index
    assert "expert_imbalance" in index
    assert lines[0].startswith("ep8-hot-expert: ")
    # drawing again from the saved files alone gives the same figures, byte for byte
    copy = tmp_path / "copy"
    shutil.copytree(tmp_path / "runs", copy / "runs")
    again = draw_gallery(copy)
    assert [p.name for p in again] == [p.name for p in figures]
    assert all(a.read_bytes() == b.read_bytes() for a, b in zip(again, figures, strict=True))


def test_fault_case_names_the_slow_gpu_and_the_degraded_link() -> None:
    scn = load_scenario_file(resolve(FAULT_CASE))
    res = run_scenario(scn)
    slow = [s for s in res.stragglers if s.cause == "slow_gpu"]
    assert [s.rank for s in slow] == [10]  # rank r runs on GPU r (stride 1)
    links = [s.link for s in res.stragglers if s.cause == "link_congestion"]
    u, v = DEGRADED_LINK
    assert links and set(links) <= {f"{u}->{v}", f"{v}->{u}"}
    assert res.stragglers[0].link == f"{u}->{v}"
