"""Generic k-ary fat tree (Al-Fares et al., SIGCOMM 2008) with one GPU per host.

::

                  core.0   ...   core.(k/2)^2-1         agg j of every pod -> cores
                 /     \\           /      \\              j*k/2 .. (j+1)*k/2-1
         agg.p0.0 .. agg.p0.k/2-1   ...  agg.p{k-1}.*    (kind "spine", tier 2)
            |    \\  /    |                              full bipartite in a pod
        edge.p0.0 .. edge.p0.k/2-1  ...  edge.p{k-1}.*   (kind "leaf", tier 1)
         |   |                                           k/2 hosts per edge switch
     h0/nic0 h1/nic0 ...                                  k^3/4 hosts in all
       |       |
     h0/gpu0 h1/gpu0                                      one GPU per host, no NVLink

k pods of k/2 edge + k/2 aggregation switches, (k/2)^2 cores: 5k^2/4 switches; every
switch-to-switch and NIC-to-edge link has ``link_gbit`` (line rate, Gbit/s). Each host is a
single GPU behind its NIC (PCIe), so ``nvlink_domain_size`` is 1 and there is no NVSwitch node.
"""

from __future__ import annotations

from moesim.topologies._graph import (
    add_link,
    add_switch,
    check_choice,
    check_int,
    check_positive,
    latency_for,
    new_graph,
)
from moesim.topologies.constants import CX7_GBIT, NVLINK_BW_GBps, gbit_to_GBps, pcie_bw_for
from moesim.topologies.errors import TopologyError
from moesim.topologies.table import LinkGraph, graph_builder


def fat_tree_table(
    k: int = 4,
    link_gbit: float = CX7_GBIT,
    gpu: str = "H100",
    fabric: str = "ib",
    name: str | None = None,
) -> LinkGraph:
    """A k-ary fat tree (k even) with k^3/4 single-GPU hosts.

    >>> g = fat_tree(4)
    >>> sum(d["kind"] == "gpu" for _, d in g.nodes(data=True)), g.graph["nvlink_domain_size"]
    (16, 1)
    >>> sorted(g.successors("agg.p1.1"))
    ['core.2', 'core.3', 'edge.p1.0', 'edge.p1.1']

    This returns a :class:`~moesim.topologies.table.LinkGraph` (no networkx);
    :func:`fat_tree`, same parameters, the networkx graph.
    """
    check_int("k", k, minimum=2)
    if k % 2:
        raise TopologyError("k", f"must be even, got {k}")
    check_positive("link_gbit", link_gbit)
    check_choice("gpu", gpu, tuple(NVLINK_BW_GBps))
    lat = latency_for(fabric)
    half, bw = k // 2, gbit_to_GBps(link_gbit)
    g = new_graph(name or f"fat-tree-k{k}", "fat_tree", 1, 1, fabric, gpu=gpu,
                  hosts=k**3 // 4, k=k, port_bw_GBps=bw)
    cores = [add_switch(g, f"core.{c}", "core") for c in range(half * half)]
    for p in range(k):
        aggs = [add_switch(g, f"agg.p{p}.{j}", "spine", pod=p) for j in range(half)]
        for j, agg in enumerate(aggs):
            for core in cores[j * half:(j + 1) * half]:
                add_link(g, agg, core, bw, lat.spine_core_ns, "spine_core")
        for e in range(half):
            edge = add_switch(g, f"edge.p{p}.{e}", "leaf", pod=p)
            for agg in aggs:
                add_link(g, edge, agg, bw, lat.leaf_spine_ns, "leaf_spine")
            for i in range(half):
                h = (p * half + e) * half + i
                gpu_node, nic = f"h{h}/gpu0", f"h{h}/nic0"
                g.add_node(gpu_node, kind="gpu", gpu=h, host=h, local=0, domain=h)
                g.add_node(nic, kind="nic", host=h, rail=0)
                add_link(g, gpu_node, nic, pcie_bw_for(bw), lat.pcie_ns, "pcie")
                add_link(g, nic, edge, bw, lat.nic_ns, "nic")
    return g


fat_tree = graph_builder(fat_tree_table, "fat_tree")
