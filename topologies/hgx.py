"""HGX hosts: GPUs on one NVSwitch fabric per host, one NIC per GPU over PCIe.

::

    h0/gpu0  h0/gpu1  ...  h0/gpu7          nvlink: gpu <-> h0/nvsw
       \\  |  \\  |            |  \\
        \\ |   \\ |  h0/nvsw   |   \\        pcie:   gpu i <-> h0/nic i
       h0/nic0  h0/nic1  ...  h0/nic7        (NICs unconnected here; the fat-tree
                                             builders attach them to rail leaves)

Node names: ``h{host}/gpu{i}``, ``h{host}/nvsw``, ``h{host}/nic{i}``.
"""

from __future__ import annotations

from moesim.topologies._graph import (
    Link,
    add_links,
    add_switch,
    check_choice,
    check_int,
    check_positive,
    latency_for,
    new_graph,
)
from moesim.topologies.constants import (
    CX7_GBIT,
    HGX_GPUS,
    NVLINK_BW_GBps,
    gbit_to_GBps,
    pcie_bw_for,
)
from moesim.topologies.table import LinkGraph, graph_builder

HGX_GPUS_PER_HOST = 8


def add_hosts(
    g: LinkGraph, hosts: int, gpus_per_host: int, nvlink_bw_GBps: float,
    nic_bw_GBps: float, fabric: str,
) -> None:
    """Add ``hosts`` hosts, each its own NVLink domain, GPUs numbered host-major."""
    lat = latency_for(fabric)
    pcie_bw = pcie_bw_for(nic_bw_GBps)
    links: list[Link] = []
    for h in range(hosts):
        nvsw = add_switch(g, f"h{h}/nvsw", "nvswitch", host=h, domain=h)
        g.add_nodes_from(
            node
            for i in range(gpus_per_host)
            for node in ((f"h{h}/gpu{i}", {"kind": "gpu", "gpu": h * gpus_per_host + i,
                                            "host": h, "local": i, "domain": h}),
                         (f"h{h}/nic{i}", {"kind": "nic", "host": h, "rail": i}))
        )
        for i in range(gpus_per_host):
            links.append((f"h{h}/gpu{i}", nvsw, nvlink_bw_GBps, lat.nvlink_ns, "nvlink"))
            links.append((f"h{h}/gpu{i}", f"h{h}/nic{i}", pcie_bw, lat.pcie_ns, "pcie"))
    add_links(g, links)



def hgx_table(
    gpu: str = "H100",
    hosts: int = 1,
    nic_gbit: float = CX7_GBIT,
    fabric: str = "ib",
    name: str | None = None,
) -> LinkGraph:
    """HGX 8-GPU host(s): one NVSwitch domain per host, one NIC per GPU (unconnected).

    With ``hosts > 1`` the hosts are separate islands (no scale-out network); use
    :func:`moesim.topologies.rail.rail_fat_tree` to join them.

    >>> g = hgx_node("H100")
    >>> g.graph["nvlink_domain_size"], g.number_of_nodes()
    (8, 17)
    >>> g.edges["h0/gpu3", "h0/nvsw"]["bw_GBps"], g.edges["h0/gpu3", "h0/nic3"]["tier"]
    (450.0, 'pcie')

    This returns a :class:`~moesim.topologies.table.LinkGraph` (no networkx);
    :func:`hgx_node`, same parameters, the networkx graph.
    """
    check_choice("gpu", gpu, HGX_GPUS)
    check_int("hosts", hosts)
    check_positive("nic_gbit", nic_gbit)
    nic_bw_GBps = gbit_to_GBps(nic_gbit)
    g = new_graph(
        name or f"hgx-{gpu.lower()}", "hgx", HGX_GPUS_PER_HOST, HGX_GPUS_PER_HOST, fabric,
        gpu=gpu, hosts=hosts, port_bw_GBps=float(nic_bw_GBps),
    )
    add_hosts(g, hosts, HGX_GPUS_PER_HOST, NVLINK_BW_GBps[gpu], float(nic_bw_GBps), fabric)
    return g


hgx_node = graph_builder(hgx_table, "hgx_node")
