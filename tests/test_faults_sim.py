"""Faults on the fabric change routes and simulated time; a disconnecting one is a clear error."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from moesim.engine.routing import Router
from moesim.errors import ConfigError, FabricError
from moesim.fabric.build import build_graph, fabric_for
from moesim.model import get_model
from moesim.router import RouterConfig
from moesim.runner.group import simulate
from moesim.scenario import FabricSpec, GroupSpec, GroupWorkload

UPLINK = ("leaf.r0.su0", "spine.0")


def _scenario(faults: tuple = ()) -> GroupSpec:
    fabric = FabricSpec(
        preset="rail-h800-64", params=(("hosts", 2), ("spines", 2)), multipath="ecmp", faults=faults
    )
    work = GroupWorkload(layers=1, tokens_per_rank=1024, backward=False)
    return GroupSpec(
        name="faults",
        model=get_model("deepseek-v3"),
        gpu="H800",
        fabric=fabric,
        ep=16,
        workload=work,
        router=RouterConfig(kind="uniform"),
        seed=3,
    )


def _fault(kind: str, factor: float | None = None) -> tuple:
    items = [("kind", kind), ("link", UPLINK)]
    if factor is not None:
        items.append(("factor", factor))
    return (tuple(sorted(items)),)


def _routes_through(scn: GroupSpec, u: str, v: str) -> int:
    fabric = fabric_for(build_graph(scn.fabric), "H800", True)
    src, dst = np.nonzero(~np.eye(16, dtype=bool))
    links = Router(fabric, "ecmp").routes(src, dst).link
    try:
        return int(np.sum(links == fabric.link_id(u, v)))
    except FabricError:  # the link is gone
        return 0


def test_degraded_uplink_slows_the_step_and_keeps_routes() -> None:
    base = simulate(_scenario())
    slow = simulate(_scenario(_fault("degrade", 0.25)))
    assert (
        _routes_through(_scenario(_fault("degrade", 0.25)), *UPLINK)
        == _routes_through(_scenario(), *UPLINK)
        > 0
    )
    assert slow.step_time_s > base.step_time_s * 1.05


def test_down_uplink_reroutes_over_the_other_spine() -> None:
    down = _scenario(_fault("down"))
    assert _routes_through(_scenario(), *UPLINK) > 0
    assert _routes_through(down, *UPLINK) == 0
    base, rerouted = simulate(_scenario()), simulate(down)
    assert rerouted.step_time_s > base.step_time_s


def test_disconnecting_failure_is_one_line(tmp_path: Path) -> None:
    nic_down = ({"link": ["h0/nic0", "leaf.r0.su0"], "kind": "down"},)
    with pytest.raises(ConfigError, match=r"fabric\.faults"):
        build_graph(
            replace(_scenario().fabric, faults=tuple(tuple(sorted(f.items())) for f in nic_down))
        )
    path = tmp_path / "cut.yaml"
    path.write_text(
        "version: 2\nmode: group\nmodel: deepseek-v3\nhardware: {gpu: H800}\n"
        "fabric: {preset: rail-h800-64, params: {hosts: 2},"
        " faults: [{link: [h0/nic0, leaf.r0.su0], kind: down}]}\n"
        "layout: {ep: 16, dp: 16}\nworkload: {layers: 1}\n"
    )
    res = subprocess.run(
        [sys.executable, "-m", "moesim.cli", "run", str(path)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert res.returncode == 2
    assert res.stderr.count("\n") == 1 and "disconnect" in res.stderr
