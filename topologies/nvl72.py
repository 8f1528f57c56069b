"""GB200 NVL72 racks: 72 GPUs on one NVLink domain, joined by a rail scale-out network.

::

                    rack0/nvsw  (the rack's 9 NVLink switch trays as ONE node)
           /     /     |      ...       \\      \\        nvlink 900 GB/s per GPU
    h0/gpu0 .. h0/gpu3  h1/gpu0 ..  ...  h17/gpu3        (18 compute trays x 4 GPUs)
       |          |        |                 |          pcie
    h0/nic0 .. h0/nic3  h1/nic0 ..  ...  h17/nic3        NIC i of every tray -> rail i
       \\__ leaf.r0.su0 __/  ...   leaf.r3.su0            (see moesim.topologies.rail)

Assumptions (NVIDIA GB200 NVL72 product page / DGX GB200 datasheet): a rack is 18
compute trays ("hosts") of 2 Grace CPUs + 4 Blackwell GPUs and 9 NVLink switch trays;
each GPU reaches the rack's NVSwitch fabric at 900 GB/s per direction; each tray has
four ConnectX-7 400 Gb/s NICs for the compute fabric, one per GPU (GB300 moves to
ConnectX-8 800 Gb/s: pass ``nic_gbit=800``); GPU <-> NIC modelled as a PCIe x16 link.
By default one rack is one scalable unit (18 NIC links per rail leaf).

Node names: ``rack{r}/nvsw``; trays are hosts ``h{host}`` numbered rack-major
(``host = rack * 18 + tray``), GPUs ``h{host}/gpu{i}`` (``local`` 0..3, ``domain`` = rack).
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
from moesim.topologies.constants import (
    CX7_GBIT,
    NVL72_GPUS,
    SWITCH_RADIX,
    NVLINK_BW_GBps,
    gbit_to_GBps,
    pcie_bw_for,
)
from moesim.topologies.rail import RailSpec, add_rail_fabric
from moesim.topologies.table import LinkGraph, graph_builder

TRAYS_PER_RACK = 18
GPUS_PER_TRAY = 4
NVL72_DOMAIN = TRAYS_PER_RACK * GPUS_PER_TRAY


def _add_rack(g: LinkGraph, rack: int, nvlink_bw: float, nic_bw: float, fabric: str) -> None:
    lat = latency_for(fabric)
    nvsw = add_switch(g, f"rack{rack}/nvsw", "nvswitch", rack=rack, domain=rack)
    for t in range(TRAYS_PER_RACK):
        h = rack * TRAYS_PER_RACK + t
        for i in range(GPUS_PER_TRAY):
            gpu, nic = f"h{h}/gpu{i}", f"h{h}/nic{i}"
            g.add_node(gpu, kind="gpu", gpu=h * GPUS_PER_TRAY + i, host=h, local=i,
                       domain=rack, rack=rack)
            g.add_node(nic, kind="nic", host=h, rail=i)
            add_link(g, gpu, nvsw, nvlink_bw, lat.nvlink_ns, "nvlink")
            add_link(g, gpu, nic, pcie_bw_for(nic_bw), lat.pcie_ns, "pcie")



def nvl72_table(
    racks: int = 1,
    gpu: str = "GB200",
    scale_out: str = "rail",
    hosts_per_su: int = TRAYS_PER_RACK,
    oversubscription: float = 1.0,
    tiers: int = 2,
    spine_oversubscription: float = 1.0,
    spines: int | None = None,
    radix: int = SWITCH_RADIX,
    nic_gbit: float = CX7_GBIT,
    fabric: str = "ib",
    name: str | None = None,
) -> LinkGraph:
    """``racks`` NVL72 racks; ``scale_out`` "rail" joins their NICs, "none" leaves them free.

    >>> g = nvl72(racks=2)
    >>> g.graph["nvlink_domain_size"], g.nodes["h18/gpu0"]["gpu"], g.nodes["h18/gpu0"]["domain"]
    (72, 72, 1)
    >>> g.edges["h18/gpu0", "rack1/nvsw"]["bw_GBps"], g.graph["spines"]
    (900.0, 3)

    This returns a :class:`~moesim.topologies.table.LinkGraph` (no networkx);
    :func:`nvl72`, same parameters, the networkx graph.
    """
    check_int("racks", racks)
    check_choice("gpu", gpu, NVL72_GPUS)
    check_choice("scale_out", scale_out, ("rail", "none"))
    check_positive("nic_gbit", nic_gbit)
    nic_bw_GBps = gbit_to_GBps(nic_gbit)
    latency_for(fabric)
    spec = RailSpec(hosts_per_su, oversubscription, tiers, spine_oversubscription, spines,
                    radix=radix)
    g = new_graph(
        name or f"nvl72-{gpu.lower()}-{racks}r", "nvl72", GPUS_PER_TRAY, NVL72_DOMAIN, fabric,
        gpu=gpu, hosts=racks * TRAYS_PER_RACK, racks=racks, port_bw_GBps=float(nic_bw_GBps),
    )
    for r in range(racks):
        _add_rack(g, r, NVLINK_BW_GBps[gpu], float(nic_bw_GBps), fabric)
    if scale_out == "rail":
        add_rail_fabric(g, racks * TRAYS_PER_RACK, GPUS_PER_TRAY, spec, float(nic_bw_GBps),
                        fabric)
    return g


nvl72 = graph_builder(nvl72_table, "nvl72")
