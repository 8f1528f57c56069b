"""``moesim topo``: the preset list, a human summary with units, JSON, fabric YAML files."""

from __future__ import annotations

import json
from pathlib import Path

import yaml
from click.testing import CliRunner

from moesim.cli import main
from moesim.fabric.build import build_graph
from moesim.scenario.load import fabric_from_dict
from moesim.topologies import load_preset, preset_names, summarize


def invoke(*args: str):  # type: ignore[no-untyped-def]
    return CliRunner().invoke(main, list(args))


def test_list_has_one_line_per_preset_with_units() -> None:
    out = invoke("topo", "--list")
    assert out.exit_code == 0, out.output
    lines = out.output.splitlines()
    assert [ln.split()[0] for ln in lines] == preset_names()
    rail = next(ln for ln in lines if ln.startswith("rail-h100-4x-4to1 "))
    assert "32 x H100" in rail and "4 hosts" in rail and "NVLink domain  8" in rail
    assert "NIC 400 Gbit/s" in rail and "oversub 4:1 leaf" in rail


def test_list_json_is_one_record_per_preset() -> None:
    out = invoke("topo", "--list", "--json")
    recs = json.loads(out.output)
    assert [r["name"] for r in recs] == preset_names()
    assert all(r["nic_gbit"] == 400.0 and r["nic_GBps"] == 50.0 for r in recs)


def test_one_preset_reads_as_text_with_units_not_python_dicts() -> None:
    out = invoke("topo", "rail-h100-4x-4to1")
    assert out.exit_code == 0, out.output
    assert "{" not in out.output and "'" not in out.output
    assert "32 x 400 Gbit/s (50 GB/s)" in out.output
    assert "bisection            800 GB/s (one direction)" in out.output
    assert json.loads(invoke("topo", "rail-h100-4x-4to1", "--json").output)["gpus"] == 32


def test_a_fabric_yaml_file_works_wherever_a_preset_name_does(tmp_path: Path) -> None:
    path = tmp_path / "my-rail.yaml"
    path.write_text(yaml.safe_dump({"builder": "rail_fat_tree", "description": "mine",
                                    "params": {"hosts": 2, "gpu": "H800", "nic_gbit": 200}}))
    g = load_preset(str(path))
    assert g.graph["name"] == "my-rail" and g.edges["h0/nic0", "leaf.r0.su0"]["bw_GBps"] == 25.0
    assert summarize(g) == summarize(load_preset("rail-h800-64", hosts=2, nic_gbit=200,
                                                 name="my-rail"))
    out = invoke("topo", str(path), "--json")
    assert json.loads(out.output)["nic_gbit"] == 200.0
    placed = invoke("place", str(path), "--ep", "16", "--json")
    assert placed.exit_code == 0, placed.output
    assert next(e for e in json.loads(placed.output) if e["kind"] == "ep")["hosts_per_group"] == 2
    scenario_fabric = build_graph(fabric_from_dict({"preset": str(path)}))
    assert summarize(scenario_fabric) == summarize(g)


def test_bad_topo_input_is_one_line(tmp_path: Path) -> None:
    for args in (("topo",), ("topo", "no-such"), ("topo", str(tmp_path / "gone.yaml"))):
        out = invoke(*args)
        assert out.exit_code == 2 and len(out.output.strip().splitlines()) == 1, out.output
