"""The builders' LinkGraph reads like the networkx graph they stand for, and fast mode's path
from a scenario to its step never imports networkx (issue 15: start-up)."""

from __future__ import annotations

import subprocess
import sys

import networkx as nx
import numpy as np
import pytest

from moesim import topologies
from moesim.engine.fabric import link_table
from moesim.errors import ConfigError
from moesim.fabric.build import build_graph, build_table
from moesim.fabric.spec import FabricSpec
from moesim.topologies.registry import TABLES, load_preset_table
from moesim.topologies.table import LinkGraph

CALLS = [
    ("rail_fat_tree", {"hosts": 40, "tiers": 3, "hosts_per_su": 4, "oversubscription": 2.0,
                       "spine_oversubscription": 2.0, "radix": 16}),
    ("rail_fat_tree", {"hosts": 6, "hosts_per_su": 4, "oversubscription": 4.0}),
    ("nvl72", {"racks": 2, "scale_out": "none"}),
    ("nvl72", {"racks": 3, "tiers": 3, "radix": 16}),
    ("multi_plane_fat_tree", {"hosts": 70, "planes": 4, "oversubscription": 2.0}),
    ("fat_tree", {"k": 6}),
    ("hgx_node", {"gpu": "H800", "hosts": 3}),
]


def _pairs() -> list[tuple[nx.DiGraph, LinkGraph]]:
    out = [(topologies.build(b, **kw), TABLES[b](**kw)) for b, kw in CALLS]
    for name in topologies.preset_names():
        table = load_preset_table(name)
        assert table is not None
        out.append((topologies.load_preset(name), table))
    return out


@pytest.mark.parametrize("pair", _pairs(), ids=lambda p: p[0].graph["name"])
def test_table_reads_as_the_networkx_graph(pair: tuple[nx.DiGraph, LinkGraph]) -> None:
    g, t = pair
    assert t.graph == g.graph
    assert list(t.nodes(data=True)) == list(g.nodes(data=True))
    assert list(t.edges(data=True)) == list(g.edges(data=True))
    assert [(u, dict(nb)) for u, nb in t.adjacency()] == [(u, dict(nb)) for u, nb in
                                                            g.adjacency()]
    assert (t.number_of_nodes(), t.number_of_edges()) == (g.number_of_nodes(),
                                                          g.number_of_edges())
    u, v = list(g.edges)[len(g.edges) // 2]
    assert t.edges[u, v] == g.edges[u, v] and t.has_edge(u, v) and not t.has_edge(u, u)
    assert list(t.successors(u)) == list(g.successors(u))
    a, b = link_table(g), link_table(t)
    assert a.names == b.names
    for field in ("kinds", "src", "dst", "attr", "typed", "tier", "tier_key"):
        x, y = getattr(a, field), getattr(b, field)
        assert x.dtype == y.dtype and np.array_equal(x, y), field
    keep = list(g.nodes)[::3]
    sub_g, sub_t = g.subgraph(keep), t.subgraph(keep)  # networkx's view: set order
    assert list(sub_t.nodes) == [n for n in g.nodes if n in sub_g]
    assert dict(sub_t.nodes(data=True)) == dict(sub_g.nodes(data=True))
    assert sorted(sub_t.edges(data=True)) == sorted(sub_g.edges(data=True))


def test_repeated_links_and_new_endpoints_as_networkx() -> None:
    """A link added twice keeps its first place and its last attributes; endpoints not yet
    nodes are added in networkx's order (u, then v, link by link)."""
    links = [("a", "b", 1.0, 5.0, "nic"), ("c", "a", 2.0, 6.0, "pcie"),
             ("b", "a", 3.0, 7.0, "nic"), ("d", "c", 4, 8, "leaf_spine")]
    t = LinkGraph(name="x")
    t.add_node("c", kind="leaf")
    t.add_links(links)
    t.add_node("a", kind="gpu")
    g = nx.DiGraph(name="x")
    g.add_node("c", kind="leaf")
    for u, v, bw, lat, tier in links:
        data = {"bw_GBps": bw, "latency_ns": lat, "tier": tier}
        g.add_edges_from([(u, v, data), (v, u, data)])
    g.add_node("a", kind="gpu")
    assert list(t.nodes(data=True)) == list(g.nodes(data=True))
    assert list(t.edges(data=True)) == list(g.edges(data=True))
    h = t.to_networkx()
    assert list(h.nodes(data=True)) == list(g.nodes(data=True))
    assert list(h.edges(data=True)) == list(g.edges(data=True))


def test_fast_step_imports_no_networkx() -> None:
    """``moesim step`` in fast mode on a shipped rail scenario: networkx never imported."""
    code = ("import sys\n"
            "from moesim.cli.main import main\n"
            "try:\n"
            "    main(['step', 'ep32-rail-4to1', '--mode', 'fast', '-q'], standalone_mode=False)\n"
            "finally:\n"
            "    print('networkx' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, timeout=300).stdout
    assert "step time" in out and out.strip().splitlines()[-1] == "False"


@pytest.mark.parametrize("preset, params", [
    ("rail-h800-64", (("hosts", 0),)),
    ("rail-h800-64", (("hosts", 4), ("tiers", 5))),
    ("rail-h800-64", (("bogus", 1),)),
    ("no-such-preset", ()),
    ("nvl72-gb200", (("scale_out", "mesh"),)),
])
def test_build_table_fails_as_build_graph(preset: str, params: tuple[tuple[str, object], ...]
                                          ) -> None:
    """Fast mode's table path names the same field with the same words as the graph path."""
    spec = FabricSpec(preset=preset, params=params)
    with pytest.raises(ConfigError) as table_err:
        build_table(spec)
    with pytest.raises(ConfigError) as graph_err:
        build_graph(spec)
    assert (table_err.value.field, str(table_err.value)) == (graph_err.value.field,
                                                             str(graph_err.value))
