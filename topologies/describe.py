"""Fabric summaries for people: one line per preset, or a short block with units.

Built on :func:`~moesim.topologies.summary.summarize`; every figure carries its unit
(GB/s: gigabytes per second; Gbit/s: NIC line rate).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from moesim.topologies.constants import BITS_PER_BYTE
from moesim.topologies.summary import summarize

if TYPE_CHECKING:
    import networkx as nx


def fabric_record(graph: nx.DiGraph, description: str = "", bisection: bool = True
                  ) -> dict[str, Any]:
    """:func:`summarize` plus the GPU model, NIC line rate and description (for ``--json``)."""
    info = summarize(graph, bisection=bisection)
    port_GBps = graph.graph.get("port_bw_GBps")
    return {**info, "description": description, "gpu": graph.graph.get("gpu"),
            "nic_gbit": None if port_GBps is None else float(port_GBps) * BITS_PER_BYTE,
            "nic_GBps": port_GBps}


def oversub_text(oversub: dict[str, float]) -> str:
    """``{"leaf": 4.0}`` -> ``"4:1 leaf"``; all 1 -> ``"1:1"``; no switch tier -> ``"n/a"``."""
    if not oversub:
        return "n/a"
    if all(abs(v - 1.0) < 1e-9 for v in oversub.values()):
        return "1:1"
    return ", ".join(f"{v:g}:1 {tier}" for tier, v in oversub.items())


def one_line(name: str, rec: dict[str, Any]) -> str:
    """A preset as one line: GPUs, hosts, NVLink domain, NIC rate, oversubscription."""
    nic = f"NIC {rec['nic_gbit']:g} Gbit/s" if rec["nics"] else "no NIC fabric"
    return (f"{name:<20} {rec['gpus']:>5} x {rec['gpu'] or '?':<5} GPUs  {rec['hosts']:>4} hosts  "
            f"NVLink domain {rec['nvlink_domain_size']:>2}  {nic}  "
            f"oversub {oversub_text(rec['oversubscription'])}  {rec['description']}").rstrip()


def _tiers(counts: dict[str, Any], unit: str = "") -> str:
    return ", ".join(f"{tier} {value:g}{unit}" for tier, value in counts.items()) or "-"


def block(rec: dict[str, Any]) -> list[str]:
    """A fabric as labelled lines with units (``moesim topo NAME``)."""
    head = f"{rec['name']}: {rec['description']}" if rec["description"] else str(rec["name"])
    bis = rec["bisection_GBps"]
    rows = [
        ("builder", f"{rec['family']} ({rec['fabric']})"),
        ("GPUs", f"{rec['gpus']} x {rec['gpu']} on {rec['hosts']} hosts"),
        ("NVLink domains", f"{rec['nvlink_domains']} of {rec['nvlink_domain_size']} GPUs"),
        ("NICs", f"{rec['nics']} x {rec['nic_gbit']:g} Gbit/s ({rec['nic_GBps']:g} GB/s)"
                 if rec["nics"] else "none"),
        ("switches", _tiers(rec["switches"])),
        ("links (full duplex)", _tiers(rec["links"])),
        ("cables (ports)", _tiers(rec["cables"])),
        ("bandwidth per tier", _tiers(rec["link_bw_GBps"], " GB/s") + " (sum, one direction)"),
        ("bisection", "not computed" if bis is None else f"{bis:g} GB/s (one direction)"),
        ("oversubscription", oversub_text(rec["oversubscription"])),
    ]
    return [head] + [f"  {label:<20} {value}" for label, value in rows]
