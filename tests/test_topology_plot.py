"""The layered fabric drawing: files by extension, elision on large fabrics."""

from __future__ import annotations

from pathlib import Path

import pytest

from moesim.plots.fabric import draw_fabric, layout
from moesim.topologies import fat_tree, rail_fat_tree


def test_draws_png_and_svg(tmp_path: Path) -> None:
    g = rail_fat_tree(4, hosts_per_su=4, oversubscription=4.0)
    png = draw_fabric(g, tmp_path / "f.png")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    svg = draw_fabric(g, tmp_path / "f.svg")
    assert "<svg" in svg.read_text()[:2000]


def test_bad_extension(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"unsupported extension '\.gif'"):
        draw_fabric(fat_tree(4), tmp_path / "f.gif")


def test_small_fabric_is_drawn_whole() -> None:
    g = fat_tree(4)
    pos, elided = layout(g)
    assert set(pos) == set(g.nodes) and elided == {}
    assert pos["core.0"][1] > pos["agg.p0.0"][1] > pos["edge.p0.0"][1] > pos["h0/gpu0"][1]


def test_large_fabric_is_elided_consistently() -> None:
    g = rail_fat_tree(64, hosts_per_su=8)  # 512 GPUs
    pos, elided = layout(g, max_per_row=32)
    gpus = [n for n in pos if g.nodes[n]["kind"] == "gpu"]
    assert len(gpus) == 32 and elided["gpu"] == 512 - 32
    assert {"h0/gpu0", "h63/gpu7"} <= set(gpus)
    for n in pos:  # every drawn non-GPU node touches something drawn below it
        if g.nodes[n]["kind"] != "gpu":
            assert any(m in pos for m in g.successors(n))
    assert all(0.0 <= x <= 1.0 for x, _ in pos.values())
