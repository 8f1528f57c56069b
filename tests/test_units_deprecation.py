"""Rates a user types are line rates in Gbit/s; the old _gbps keys are read as Gbit/s, as their
name says, with a notice."""

from __future__ import annotations

import networkx as nx
import pytest
import yaml

from moesim.fabric.build import build_graph
from moesim.scenario import load_scenario_file
from moesim.topologies import TopologyError, deprecated, load_preset


@pytest.fixture(autouse=True)
def fresh_notices(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(deprecated, "_noticed", set())


def same_fabric(a: nx.DiGraph, b: nx.DiGraph) -> bool:
    return a.graph == b.graph and sorted(a.edges(data=True)) == sorted(b.edges(data=True))


def step_file(tmp_path, params: dict[str, object]) -> str:  # type: ignore[no-untyped-def]
    path = tmp_path / f"s{len(list(tmp_path.iterdir()))}.yaml"
    path.write_text(yaml.safe_dump({
        "version": 2, "name": "units", "model": "mixtral-8x7b", "hardware": {"gpu": "H800"},
        "fabric": {"preset": "rail-h800-64", "params": {"hosts": 2, **params}},
        "layout": {"tp": 1, "pp": 1, "ep": 8, "dp": 16},
        "workload": {"global_batch": 16, "seq_len": 512},
    }))
    return str(path)


def test_step_scenario_old_key_gives_the_same_fabric_and_one_notice(tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    new = load_scenario_file(step_file(tmp_path, {"nic_gbit": 400}))
    assert capsys.readouterr().err == ""
    old = load_scenario_file(step_file(tmp_path, {"nic_bw_gbps": 400}))  # what users type
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and "nic_bw_gbps" in err[0] and "nic_gbit: 400" in err[0], err
    assert old.fabric == new.fabric
    g_old, g_new = build_graph(old.fabric), build_graph(new.fabric)
    assert same_fabric(g_old, g_new)
    assert g_new.edges["h1/nic3", "leaf.r3.su0"]["bw_GBps"] == 50.0


def test_400g_nic_is_50_gigabytes_per_second() -> None:
    g = load_preset("rail-h800-64", hosts=2, nic_gbit=800)
    assert g.edges["h0/nic0", "leaf.r0.su0"]["bw_GBps"] == 100.0
    assert g.graph["port_bw_GBps"] == 100.0


def test_preset_override_and_builder_old_keys(capsys) -> None:  # type: ignore[no-untyped-def]
    assert same_fabric(load_preset("fat-tree-k8", link_bw_gbps=200),
                       load_preset("fat-tree-k8", link_gbit=200))
    assert same_fabric(load_preset("rail-h800-64", nic_bw_gbps=800),
                       load_preset("rail-h800-64", nic_gbit=800))
    lines = capsys.readouterr().err.splitlines()
    assert [ln.split()[1] for ln in lines] == ["link_bw_gbps", "nic_bw_gbps"]


def test_old_and_new_key_together_is_an_error() -> None:
    with pytest.raises(TopologyError, match="nic_bw_gbps: give nic_gbit"):
        load_preset("hgx-h800", nic_gbit=400, nic_bw_gbps=50)
