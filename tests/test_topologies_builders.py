"""Builders: schema, line rates, latencies, NVLink domains, path diversity, bad input."""

from __future__ import annotations

import doctest
import importlib
from collections.abc import Callable
from itertools import pairwise

import networkx as nx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from moesim.topologies import (
    TopologyError,
    equal_cost_paths,
    fat_tree,
    hgx_node,
    multi_plane_fat_tree,
    nvl72,
    rail_fat_tree,
)

KINDS = {"gpu", "nvswitch", "nic", "leaf", "spine", "core"}
TIERS = {"nvlink", "pcie", "nic", "leaf_spine", "spine_core"}


def check_schema(g: nx.DiGraph) -> None:
    for key in ("name", "family", "gpus_per_host", "nvlink_domain_size", "fabric"):
        assert key in g.graph
    for u, v, d in g.edges(data=True):
        assert g.has_edge(v, u) and g.edges[v, u] == d  # full duplex, symmetric
        assert d["bw_GBps"] > 0 and d["latency_ns"] > 0 and d["tier"] in TIERS
    gph = g.graph["gpus_per_host"]
    gpus = [d for _, d in g.nodes(data=True) if d["kind"] == "gpu"]
    assert sorted(d["gpu"] for d in gpus) == list(range(len(gpus)))
    for n, d in g.nodes(data=True):
        assert d["kind"] in KINDS
        if d["kind"] == "gpu":
            assert d["gpu"] == d["host"] * gph + d["local"]
            assert n == f"h{d['host']}/gpu{d['local']}"
        elif d["kind"] == "nic":
            assert {"host", "rail"} <= d.keys()
        else:
            assert isinstance(d["tier"], int)
    domains: dict[int, int] = {}
    for d in gpus:
        domains[d["domain"]] = domains.get(d["domain"], 0) + 1
    assert set(domains.values()) == {g.graph["nvlink_domain_size"]}


def path_latency_ns(g: nx.DiGraph, path: list[str]) -> float:
    return sum(g.edges[u, v]["latency_ns"] for u, v in pairwise(path))


@pytest.mark.parametrize(
    "g",
    [hgx_node(), hgx_node("B200", hosts=2), rail_fat_tree(6, hosts_per_su=4),
     rail_fat_tree(10, hosts_per_su=2, tiers=3, sus_per_pod=2, oversubscription=2.0),
     nvl72(2), nvl72(1, scale_out="none"), multi_plane_fat_tree(12, hosts_per_leaf=4),
     multi_plane_fat_tree(4, planes=2), fat_tree(4), fat_tree(6)],
    ids=lambda g: g.graph["name"],
)
def test_schema(g: nx.DiGraph) -> None:
    check_schema(g)


@given(hosts=st.integers(1, 12), hps=st.integers(1, 6), o=st.sampled_from([1.0, 2.0, 3.0, 4.0]),
       tiers=st.sampled_from([2, 3]), fabric=st.sampled_from(["ib", "roce"]))
@settings(max_examples=25, deadline=None)
def test_rail_schema_and_uplinks_property(hosts: int, hps: int, o: float, tiers: int,
                                          fabric: str) -> None:
    g = rail_fat_tree(hosts, hosts_per_su=hps, oversubscription=o, tiers=tiers, fabric=fabric,
                      sus_per_pod=2)
    check_schema(g)
    for leaf, d in g.nodes(data=True):
        if d["kind"] != "leaf":
            continue
        down = sum(g.edges[n, leaf]["bw_GBps"] for n in g.predecessors(leaf)
                   if g.nodes[n]["kind"] == "nic")
        up = sum(g.edges[leaf, s]["bw_GBps"] for s in g.successors(leaf)
                 if g.nodes[s]["kind"] == "spine")
        assert up == pytest.approx(down / o)
    assert equal_cost_paths(g, 0, hosts * 8 - 1) >= 1  # everything reachable


def test_line_rates() -> None:
    assert hgx_node("H100").edges["h0/gpu0", "h0/nvsw"]["bw_GBps"] == 450.0
    assert hgx_node("H200").edges["h0/nvsw", "h0/gpu7"]["bw_GBps"] == 450.0
    assert hgx_node("H800").edges["h0/gpu0", "h0/nvsw"]["bw_GBps"] == 200.0
    assert hgx_node("B200").edges["h0/gpu0", "h0/nvsw"]["bw_GBps"] == 900.0
    assert nvl72().edges["h17/gpu3", "rack0/nvsw"]["bw_GBps"] == 900.0
    g = rail_fat_tree(2)
    assert g.edges["h1/gpu3", "h1/nic3"]["bw_GBps"] == 64.0
    assert g.edges["h1/nic3", "leaf.r3.su0"]["bw_GBps"] == 50.0
    # a CX8-class NIC (100 GB/s) rides PCIe Gen6 x16 (128 GB/s)
    assert rail_fat_tree(2, nic_gbit=800).edges["h0/gpu0", "h0/nic0"]["bw_GBps"] == 128.0


@pytest.mark.parametrize(("fabric", "same_ns", "cross_ns"),
                         [("ib", 2800.0, 3700.0), ("roce", 3600.0, 5600.0)])
def test_latency_split_reproduces_table5(fabric: str, same_ns: float, cross_ns: float) -> None:
    g = rail_fat_tree(2, fabric=fabric, spines=2)
    same = ["h0/gpu0", "h0/nic0", "leaf.r0.su0", "h1/nic0", "h1/gpu0"]
    cross = ["h0/gpu0", "h0/nic0", "leaf.r0.su0", "spine.1", "leaf.r1.su0", "h1/nic1",
             "h1/gpu1"]
    assert path_latency_ns(g, same) == same_ns
    assert path_latency_ns(g, cross) == cross_ns
    assert path_latency_ns(g, ["h0/gpu0", "h0/nvsw", "h0/gpu5"]) == 3330.0


def test_nvlink_domain_sizes() -> None:
    assert hgx_node().graph["nvlink_domain_size"] == 8
    assert rail_fat_tree(4).graph["nvlink_domain_size"] == 8
    g = nvl72(racks=2)
    assert g.graph["nvlink_domain_size"] == 72
    assert {d["domain"] for _, d in g.nodes(data=True) if d["kind"] == "gpu"} == {0, 1}
    assert g.nodes["h35/gpu3"]["gpu"] == 143 and g.nodes["h35/gpu3"]["domain"] == 1
    assert fat_tree(4).graph["nvlink_domain_size"] == 1


def test_rail_small_4_to_1() -> None:
    g = rail_fat_tree(4, hosts_per_su=4, oversubscription=4.0)
    for r in range(8):
        leaf = f"leaf.r{r}.su0"
        nics = [n for n in g.predecessors(leaf) if g.nodes[n]["kind"] == "nic"]
        assert sorted(nics) == [f"h{h}/nic{r}" for h in range(4)]
        up = [g.edges[leaf, s]["bw_GBps"] for s in g.successors(leaf)
              if g.nodes[s]["kind"] == "spine"]
        assert sum(up) == 50.0


def test_ecmp_hgx_and_rail_two_tier() -> None:
    assert equal_cost_paths(hgx_node(), 0, 7) == 1
    assert equal_cost_paths(hgx_node(hosts=2), 0, 8) == 0  # no scale-out network
    g = rail_fat_tree(8, hosts_per_su=4, spines=4)
    assert equal_cost_paths(g, 0, 5) == 1  # same host: NVSwitch
    assert equal_cost_paths(g, "h0/gpu2", "h3/gpu2") == 1  # same rail, same SU: one leaf
    assert equal_cost_paths(g, "h0/gpu2", "h3/gpu5") == 4  # different rail: via any spine
    assert equal_cost_paths(g, "h0/gpu2", "h4/gpu2") == 4  # same rail, other SU


def test_ecmp_rail_three_tier() -> None:
    g = rail_fat_tree(16, hosts_per_su=2, tiers=3, sus_per_pod=2, spines=3, cores_per_group=2)
    assert g.graph["pods"] == 4 and g.graph["cores"] == 6
    assert equal_cost_paths(g, "h0/gpu1", "h1/gpu1") == 1
    assert equal_cost_paths(g, "h0/gpu1", "h3/gpu1") == 3  # same pod, other SU
    assert equal_cost_paths(g, "h0/gpu1", "h15/gpu6") == 6  # other pod: spines x cores/group


def test_ecmp_nvl72() -> None:
    g = nvl72(racks=2, spines=2)
    assert equal_cost_paths(g, 0, 71) == 1  # same rack, different trays: NVLink
    assert equal_cost_paths(g, 0, 72) == 2  # same rail, other rack
    assert equal_cost_paths(g, 0, 75) == 2  # other rail, other rack


def test_ecmp_mpft() -> None:
    g = multi_plane_fat_tree(8, hosts_per_leaf=2, spines=3)
    assert g.nodes["h5/nic6"]["plane"] == 6
    assert equal_cost_paths(g, "h0/gpu3", "h0/gpu4") == 1
    assert equal_cost_paths(g, "h0/gpu3", "h1/gpu3") == 1  # same plane, same leaf
    assert equal_cost_paths(g, "h0/gpu3", "h7/gpu3") == 3  # same plane, other leaf
    assert equal_cost_paths(g, "h0/gpu3", "h7/gpu4") == 0  # other plane: needs PXN
    two = multi_plane_fat_tree(4, planes=2, hosts_per_leaf=4)
    assert two.nodes["h0/nic5"]["plane"] == 1
    assert equal_cost_paths(two, "h0/gpu1", "h2/gpu3") == 1  # NICs 1 and 3 share plane 1


def test_ecmp_fat_tree() -> None:
    g = fat_tree(4)
    assert equal_cost_paths(g, 0, 1) == 1
    assert equal_cost_paths(g, 0, 2) == 2  # same pod: k/2 aggregation switches
    assert equal_cost_paths(g, 0, 15) == 4  # other pod: (k/2)^2 cores
    assert equal_cost_paths(fat_tree(8), 0, 127) == 16


@pytest.mark.parametrize(
    ("build", "field"),
    [(lambda: hgx_node("V100"), "gpu"), (lambda: hgx_node(hosts=0), "hosts"),
     (lambda: rail_fat_tree(4, tiers=4), "tiers"),
     (lambda: rail_fat_tree(4, oversubscription=0), "oversubscription"),
     (lambda: rail_fat_tree(4, fabric="ethernet"), "fabric"),
     (lambda: rail_fat_tree(4, gpu="GB200"), "gpu"),
     (lambda: rail_fat_tree(4, spines=0), "spines"),
     (lambda: nvl72(scale_out="mesh"), "scale_out"),
     (lambda: multi_plane_fat_tree(4, planes=3), "planes"),
     (lambda: fat_tree(5), "k"), (lambda: fat_tree(4, link_gbit=-1), "link_gbit")],
)
def test_bad_input_names_field(build: Callable[[], object], field: str) -> None:
    with pytest.raises(TopologyError) as err:
        build()
    assert err.value.field == field
    assert str(err.value).startswith(f"{field}: ")


def test_unknown_choice_lists_allowed() -> None:
    with pytest.raises(TopologyError,
                       match=r"unknown 'V100'; allowed: H100, H800, H200, B200, A100, A800"):
        hgx_node("V100")


@pytest.mark.parametrize("module", ["hgx", "rail", "nvl72", "mpft", "fat_tree", "faults",
                                    "registry"])
def test_docstring_examples_run(module: str) -> None:
    result = doctest.testmod(importlib.import_module(f"moesim.topologies.{module}"))
    assert result.attempted > 0 and result.failed == 0
