"""Rail-optimized fat tree (DGX SuperPOD pattern) over HGX hosts.

::

        spine.0 ........ spine.S-1                 (3 tiers: spine.p{pod}.{j}
         /   \\            /    \\                    below core.{c}; spine j of
    leaf.r0.su0 ... leaf.r7.su0   leaf.r0.su1 ...    every pod -> core group j)
      |    |          |    |
    h0/nic0 h1/nic0  h0/nic7 h1/nic7   h32/nic0 ...   NIC i of every host in a
      |                |                              scalable unit (SU) sits on
    h0/gpu0 ...      h0/gpu7     (NVSwitch per host)  rail leaf i of that SU

Node names: leaves ``leaf.r{rail}.su{su}``; spines ``spine.{j}`` (2 tiers) or
``spine.p{pod}.{j}`` (3 tiers); cores ``core.{c}``; hosts as in :mod:`moesim.topologies.hgx`.

Sizing (one directed edge per switch pair, carrying the pair's aggregate bandwidth):

* leaf uplink total = (NIC links attached x NIC bw) / ``oversubscription``, split evenly
  over the spines it reaches; spine uplink total (3 tiers) = its downlink total /
  ``spine_oversubscription``, split evenly over its core group.
* default spines (2 tiers) = ceil(leaf uplink ports / radix); 3 tiers: a spine has
  d = radix x o_s / (1 + o_s) down ports, pods hold d // rails SUs, spines per pod =
  ceil(leaf uplink ports per pod / d), cores per group = ceil(pods x spine up ports / radix).
  (64-port switches: 2 tiers reach 2048 NICs at 1:1; larger fabrics need 3 tiers.)
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from moesim.topologies._graph import (
    Link,
    add_links,
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
from moesim.topologies.hgx import add_hosts
from moesim.topologies.table import LinkGraph, graph_builder


@dataclass(frozen=True)
class RailSpec:
    """Shape of a rail-optimized scale-out network; ``spines`` is per pod with 3 tiers."""

    hosts_per_su: int = 32
    oversubscription: float = 1.0
    tiers: int = 2
    spine_oversubscription: float = 1.0
    spines: int | None = None
    sus_per_pod: int | None = None
    cores_per_group: int | None = None
    radix: int = SWITCH_RADIX

    def __post_init__(self) -> None:
        check_int("hosts_per_su", self.hosts_per_su)
        check_positive("oversubscription", self.oversubscription)
        check_choice("tiers", self.tiers, (2, 3))
        check_positive("spine_oversubscription", self.spine_oversubscription)
        check_int("radix", self.radix, minimum=2)
        for field in ("spines", "sus_per_pod", "cores_per_group"):
            if getattr(self, field) is not None:
                check_int(field, getattr(self, field))

    def spine_down_ports(self) -> int:
        """Ports of a 3-tier spine facing leaves (the rest face cores)."""
        o_s = self.spine_oversubscription
        return max(1, math.floor(self.radix * o_s / (1.0 + o_s) + 1e-9))


def add_rail_fabric(
    g: LinkGraph, hosts: int, rails: int, spec: RailSpec, nic_bw_GBps: float, fabric: str
) -> None:
    """Attach NIC ``h{h}/nic{r}`` of every host to rail leaves, then spines (and cores)."""
    lat = latency_for(fabric)
    n_su = math.ceil(hosts / spec.hosts_per_su)
    sus_per_pod = spec.sus_per_pod or max(1, spec.spine_down_ports() // rails)
    up_bw: dict[str, float] = {}
    links: list[Link] = []
    for su in range(n_su):
        members = range(su * spec.hosts_per_su, min(hosts, (su + 1) * spec.hosts_per_su))
        pod = {"pod": su // sus_per_pod} if spec.tiers == 3 else {}
        for r in range(rails):
            leaf = add_switch(g, f"leaf.r{r}.su{su}", "leaf", rail=r, su=su, **pod)
            links += [(f"h{h}/nic{r}", leaf, nic_bw_GBps, lat.nic_ns, "nic") for h in members]
            up_bw[leaf] = len(members) * nic_bw_GBps / spec.oversubscription
    add_links(g, links)
    g.graph.update(sus=n_su, rails=rails, hosts_per_su=spec.hosts_per_su)
    if spec.tiers == 2:
        _two_tier(g, up_bw, spec, nic_bw_GBps, lat.leaf_spine_ns)
    else:
        _three_tier(g, up_bw, spec, sus_per_pod, nic_bw_GBps, (lat.leaf_spine_ns,
                                                               lat.spine_core_ns))


def _two_tier(
    g: LinkGraph, up_bw: dict[str, float], spec: RailSpec, port_bw: float, latency_ns: float
) -> None:
    up_ports = sum(ports(bw, port_bw) for bw in up_bw.values())
    n_spines = spec.spines or max(1, math.ceil(up_ports / spec.radix))
    spines = [add_switch(g, f"spine.{j}", "spine") for j in range(n_spines)]
    add_links(g, [(leaf, spine, bw / n_spines, latency_ns, "leaf_spine")
                  for leaf, bw in up_bw.items() for spine in spines])
    g.graph.update(spines=n_spines, pods=1, cores=0)


def _three_tier(
    g: LinkGraph, up_bw: dict[str, float], spec: RailSpec, sus_per_pod: int,
    port_bw: float, latency_ns: tuple[float, float],
) -> None:
    by_pod: dict[int, list[str]] = {}
    for leaf in up_bw:
        by_pod.setdefault(g.nodes[leaf]["pod"], []).append(leaf)
    pod_ports = max(sum(ports(up_bw[lf], port_bw) for lf in lvs) for lvs in by_pod.values())
    n_spines = spec.spines or max(1, math.ceil(pod_ports / spec.spine_down_ports()))
    spine_up: dict[tuple[int, int], float] = {}
    links: list[Link] = []
    for pod, leaves in by_pod.items():
        for j in range(n_spines):
            spine = add_switch(g, f"spine.p{pod}.{j}", "spine", pod=pod, group=j)
            links += [(leaf, spine, up_bw[leaf] / n_spines, latency_ns[0], "leaf_spine")
                      for leaf in leaves]
            down = sum(up_bw[leaf] for leaf in leaves) / n_spines
            spine_up[(pod, j)] = down / spec.spine_oversubscription
    up_ports = max(ports(bw, port_bw) for bw in spine_up.values())
    per_group = spec.cores_per_group or max(1, math.ceil(len(by_pod) * up_ports / spec.radix))
    for j in range(n_spines):
        cores = [add_switch(g, f"core.{j * per_group + c}", "core", group=j)
                 for c in range(per_group)]
        links += [(f"spine.p{pod}.{j}", core, spine_up[(pod, j)] / per_group, latency_ns[1],
                   "spine_core") for pod in by_pod for core in cores]
    add_links(g, links)
    g.graph.update(spines=n_spines * len(by_pod), spines_per_pod=n_spines, pods=len(by_pod),
                   sus_per_pod=sus_per_pod, cores=n_spines * per_group, cores_per_group=per_group)



def rail_table(
    hosts: int,
    gpu: str = "H100",
    gpus_per_host: int = 8,
    hosts_per_su: int = 32,
    oversubscription: float = 1.0,
    tiers: int = 2,
    spine_oversubscription: float = 1.0,
    spines: int | None = None,
    sus_per_pod: int | None = None,
    cores_per_group: int | None = None,
    radix: int = SWITCH_RADIX,
    nic_gbit: float = CX7_GBIT,
    fabric: str = "ib",
    name: str | None = None,
) -> LinkGraph:
    """HGX hosts on a rail-optimized 2- or 3-tier fat tree (see module docstring).

    Four hosts in one SU at 4:1: each rail leaf has 4 NIC links and 50 GB/s of uplink.

    >>> g = rail_fat_tree(4, hosts_per_su=4, oversubscription=4.0)
    >>> g.graph["spines"], g.degree("leaf.r5.su0") // 2
    (1, 5)
    >>> g.edges["leaf.r5.su0", "spine.0"]["bw_GBps"]
    50.0

    This returns a :class:`~moesim.topologies.table.LinkGraph` (no networkx);
    :func:`rail_fat_tree`, same parameters, the networkx graph.
    """
    check_choice("gpu", gpu, HGX_GPUS)
    check_int("hosts", hosts)
    check_int("gpus_per_host", gpus_per_host)
    check_positive("nic_gbit", nic_gbit)
    nic_bw_GBps = gbit_to_GBps(nic_gbit)
    latency_for(fabric)
    spec = RailSpec(hosts_per_su, oversubscription, tiers, spine_oversubscription, spines,
                    sus_per_pod, cores_per_group, radix)
    g = new_graph(
        name or f"rail-{gpu.lower()}-{hosts * gpus_per_host}", "rail_fat_tree", gpus_per_host,
        gpus_per_host, fabric, gpu=gpu, hosts=hosts, tiers=tiers, port_bw_GBps=float(nic_bw_GBps),
    )
    add_hosts(g, hosts, gpus_per_host, NVLINK_BW_GBps[gpu], float(nic_bw_GBps), fabric)
    add_rail_fabric(g, hosts, gpus_per_host, spec, float(nic_bw_GBps), fabric)
    return g


rail_fat_tree = graph_builder(rail_table, "rail_fat_tree")
