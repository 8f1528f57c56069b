"""Shared helpers for builders: graph creation, full-duplex links, input checks."""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

from moesim.topologies.constants import FABRICS, LATENCY, LatencyProfile
from moesim.topologies.errors import TopologyError
from moesim.topologies.table import Link, LinkGraph

SWITCH_TIER: dict[str, int] = {"nvswitch": 0, "leaf": 1, "spine": 2, "core": 3}


def new_graph(
    name: str, family: str, gpus_per_host: int, nvlink_domain_size: int, fabric: str,
    **attrs: Any,
) -> LinkGraph:
    """An empty fabric graph carrying the schema's graph attributes."""
    return LinkGraph(
        name=name, family=family, gpus_per_host=gpus_per_host,
        nvlink_domain_size=nvlink_domain_size, fabric=fabric, **attrs,
    )


def add_link(
    g: LinkGraph, u: str, v: str, bw_GBps: float, latency_ns: float, tier: str
) -> None:
    """One physical full-duplex link = two directed edges with the same attributes."""
    add_links(g, ((u, v, bw_GBps, latency_ns, tier),))


def add_links(g: LinkGraph, links: Iterable[Link]) -> None:
    """:func:`add_link` for each of ``links`` (``(u, v, bw_GBps, latency_ns, tier)``), in
    order."""
    g.add_links(links)


def add_switch(g: LinkGraph, name: str, kind: str, **attrs: Any) -> str:
    """A switch node of ``kind`` with its integer ``tier``; returns the name."""
    g.add_node(name, kind=kind, tier=SWITCH_TIER[kind], **attrs)
    return name


def check_choice(field: str, value: object, allowed: Iterable[object]) -> None:
    allowed = tuple(allowed)
    if value not in allowed:
        names = ", ".join(str(a) for a in allowed)
        raise TopologyError(field, f"unknown {value!r}; allowed: {names}")


def check_int(field: str, value: object, minimum: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise TopologyError(field, f"must be an integer >= {minimum}, got {value!r}")
    return value


def check_positive(field: str, value: object) -> float:
    ok = isinstance(value, int | float) and not isinstance(value, bool)
    if not ok or not math.isfinite(float(value)) or float(value) <= 0:  # type: ignore[arg-type]
        raise TopologyError(field, f"must be a number > 0, got {value!r}")
    return float(value)  # type: ignore[arg-type]


def latency_for(fabric: str) -> LatencyProfile:
    check_choice("fabric", fabric, FABRICS)
    return LATENCY[fabric]


def ports(bw_GBps: float, port_bw_GBps: float) -> int:
    """Physical ports (cables) needed to carry ``bw_GBps`` at ``port_bw_GBps`` each."""
    return max(1, math.ceil(bw_GBps / port_bw_GBps - 1e-9))
