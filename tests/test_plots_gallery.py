"""The gallery script on one fast case, and its fault case's attribution."""

from __future__ import annotations

from pathlib import Path

from moesim.plots.gallery import DEGRADED_LINK, FAULT_CASE, SLOW_GPU, build_gallery, fault_case
from moesim.runner.run import run_scenario


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


def test_fault_case_names_the_slow_gpu_and_the_degraded_link() -> None:
    scn = fault_case()
    assert scn.name == FAULT_CASE
    res = run_scenario(scn)
    slow = [s for s in res.stragglers if s.cause == "slow_gpu"]
    assert [s.rank for s in slow] == [SLOW_GPU[0]]  # rank r runs on GPU r (stride 1)
    links = [s.link for s in res.stragglers if s.cause == "link_congestion"]
    u, v = DEGRADED_LINK
    assert links and set(links) <= {f"{u}->{v}", f"{v}->{u}"}
    assert res.stragglers[0].link == f"{u}->{v}"
