"""Multi-plane fat tree (DeepSeek-V3 style MPFT): NIC i of every host on plane i.

::

      spine.pl0.0 .. spine.pl0.S-1         spine.pl7.0 .. spine.pl7.S-1
          |  \\    /   |                        |   \\   /  |
      leaf.pl0.0 ... leaf.pl0.L-1    ...   leaf.pl7.0 ... leaf.pl7.L-1
        |      |                              |      |
      h0/nic0 h1/nic0 ...                   h0/nic7 h1/nic7 ...
        |                                     |
      h0/gpu0   ....   (NVSwitch per host)  h0/gpu7

Each plane is an independent two-tier fat tree: planes share no switch. As in DeepSeek's
deployment ("Insights into DeepSeek-V3", ISCA'25, §5.1: 8 planes, each GPU-NIC pair on its
own plane, 64-port 400G switches) traffic between different planes of different hosts has no
path that avoids GPUs: it needs intra-node forwarding (PXN through a peer GPU), which is an
engine option; :func:`moesim.topologies.summary.equal_cost_paths` counts 0 such paths.

Node names: leaves ``leaf.pl{plane}.{j}`` (leaf j serves hosts j*hosts_per_leaf ...),
spines ``spine.pl{plane}.{j}``; NICs carry ``plane``. With ``planes < gpus_per_host``
NIC i goes to plane ``i % planes``.
"""

from __future__ import annotations

import math

from moesim.topologies._graph import (
    add_link,
    add_switch,
    check_choice,
    check_int,
    check_positive,
    latency_for,
    new_graph,
    ports,
)
from moesim.topologies.constants import (
    CX7_GBIT,
    HGX_GPUS,
    SWITCH_RADIX,
    NVLINK_BW_GBps,
    gbit_to_GBps,
)
from moesim.topologies.errors import TopologyError
from moesim.topologies.hgx import add_hosts
from moesim.topologies.table import LinkGraph, graph_builder


def _add_plane(
    g: LinkGraph, plane: int, nics: list[list[str]], oversubscription: float,
    spines: int | None, radix: int, nic_bw: float, fabric: str,
) -> int:
    """One plane: ``nics[j]`` are leaf j's NICs; returns its spine count."""
    lat = latency_for(fabric)
    up_bw = {}
    for j, members in enumerate(nics):
        leaf = add_switch(g, f"leaf.pl{plane}.{j}", "leaf", plane=plane)
        for nic in members:
            g.nodes[nic]["plane"] = plane
            add_link(g, nic, leaf, nic_bw, lat.nic_ns, "nic")
        up_bw[leaf] = len(members) * nic_bw / oversubscription
    up_ports = sum(ports(bw, nic_bw) for bw in up_bw.values())
    n_spines = spines or max(1, math.ceil(up_ports / radix))
    for s in range(n_spines):
        spine = add_switch(g, f"spine.pl{plane}.{s}", "spine", plane=plane)
        for leaf, bw in up_bw.items():
            add_link(g, leaf, spine, bw / n_spines, lat.leaf_spine_ns, "leaf_spine")
    return n_spines



def mpft_table(
    hosts: int,
    planes: int = 8,
    gpu: str = "H800",
    gpus_per_host: int = 8,
    hosts_per_leaf: int = SWITCH_RADIX // 2,
    oversubscription: float = 1.0,
    spines: int | None = None,
    radix: int = SWITCH_RADIX,
    nic_gbit: float = CX7_GBIT,
    fabric: str = "ib",
    name: str | None = None,
) -> LinkGraph:
    """HGX hosts on ``planes`` independent two-tier fat trees (``spines`` is per plane).

    >>> g = multi_plane_fat_tree(64)
    >>> g.nodes["h40/nic3"]["plane"], g.graph["spines_per_plane"]
    (3, 1)
    >>> sorted(g.successors("h40/nic3"))
    ['h40/gpu3', 'leaf.pl3.1']

    This returns a :class:`~moesim.topologies.table.LinkGraph` (no networkx);
    :func:`multi_plane_fat_tree`, same parameters, the networkx graph.
    """
    check_int("hosts", hosts)
    check_choice("gpu", gpu, HGX_GPUS)
    check_int("gpus_per_host", gpus_per_host)
    check_int("planes", planes)
    if gpus_per_host % planes:
        raise TopologyError("planes", f"must divide gpus_per_host={gpus_per_host}, got {planes}")
    check_int("hosts_per_leaf", hosts_per_leaf)
    check_positive("oversubscription", oversubscription)
    check_positive("nic_gbit", nic_gbit)
    nic_bw_GBps = gbit_to_GBps(nic_gbit)
    check_int("radix", radix, minimum=2)
    if spines is not None:
        check_int("spines", spines)
    latency_for(fabric)
    g = new_graph(
        name or f"mpft-{gpu.lower()}-{hosts * gpus_per_host}", "multi_plane_fat_tree",
        gpus_per_host, gpus_per_host, fabric, gpu=gpu, hosts=hosts, planes=planes,
        port_bw_GBps=float(nic_bw_GBps),
    )
    add_hosts(g, hosts, gpus_per_host, NVLINK_BW_GBps[gpu], float(nic_bw_GBps), fabric)
    n_leaves = math.ceil(hosts / hosts_per_leaf)
    for p in range(planes):
        nics = [
            [f"h{h}/nic{i}" for h in range(j * hosts_per_leaf, min(hosts, (j + 1) *
                                                                  hosts_per_leaf))
             for i in range(p, gpus_per_host, planes)]
            for j in range(n_leaves)
        ]
        n_spines = _add_plane(g, p, nics, float(oversubscription), spines, radix,
                              float(nic_bw_GBps), fabric)
    g.graph.update(leaves_per_plane=n_leaves, spines_per_plane=n_spines)
    return g


multi_plane_fat_tree = graph_builder(mpft_table, "multi_plane_fat_tree")
