"""Turn a scenario's fabric spec into the engine's :class:`Fabric` (topology + calibration).

Topology errors (unknown preset, bad parameter, a fault that disconnects GPUs)
come back as ``ConfigError`` naming the field, for the CLI's one-line answer.

:func:`build_graph` gives the networkx graph; :func:`build_table` the same graph as the
builders write it (:class:`moesim.topologies.table.LinkGraph`), which fast mode reads into
its link arrays without importing networkx (a fabric with faults, or from a builder registered
without a table, is still built with networkx).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from moesim import topologies
from moesim.calibration import UNCONGESTED_FACTOR, link_achievable_fraction
from moesim.engine.fabric import Fabric, LinkTable, fabric_from_table, link_table
from moesim.errors import ConfigError
from moesim.fabric.spec import FabricSpec
from moesim.topologies.registry import load_preset_table

if TYPE_CHECKING:
    import networkx as nx

    from moesim.engine.fabric import Graph

CORE_TIERS = ("leaf_spine", "spine_core")
"""Link tiers inside the switched fabric (not a GPU's own NVLink, PCIe or NIC port)."""



def build_graph(spec: FabricSpec) -> nx.DiGraph:
    """The fabric graph of ``spec``, faults applied."""
    try:
        graph = topologies.load_preset(spec.preset, **dict(spec.params))
        if spec.faults:
            graph = topologies.apply_faults(graph, [_fault(f) for f in spec.faults])
    except topologies.TopologyError as exc:
        raise ConfigError(f"fabric.{exc.field}", exc.problem) from exc
    except TypeError as exc:
        raise ConfigError("fabric.params", str(exc)) from exc
    return graph


def build_table(spec: FabricSpec) -> Graph:
    """:func:`build_graph`'s graph as a :class:`~moesim.topologies.table.LinkGraph` where the
    preset's builder has one and there are no faults; else :func:`build_graph`'s."""
    if spec.faults:
        return build_graph(spec)
    try:
        table = load_preset_table(spec.preset, **dict(spec.params))
    except topologies.TopologyError as exc:
        raise ConfigError(f"fabric.{exc.field}", exc.problem) from exc
    except TypeError as exc:
        raise ConfigError("fabric.params", str(exc)) from exc
    return build_graph(spec) if table is None else table


def _fault(items: Iterable[tuple[str, object]]) -> dict[str, object]:
    return dict(items)


def fabric_for(graph: Graph, gpu: str, derate: bool, table: LinkTable | None = None
               ) -> Fabric:
    """Index ``graph`` (or its ``table``, read already) for the engine, derating each tier
    to its achievable bandwidth."""
    table = link_table(graph) if table is None else table
    tiers = set(table.tier_key.tolist())
    return fabric_from_table(table, derating(tiers, graph, gpu, derate))


def derating(tiers: Iterable[str], graph: Graph, gpu: str, derate: bool
             ) -> dict[str, float] | None:
    """Achievable fraction of each of ``tiers`` on ``graph``'s medium (None: no derating)."""
    medium = str(graph.graph.get("fabric", "ib"))
    return {t: link_achievable_fraction(t, medium, gpu) for t in tiers} if derate else None


def uncongested(graph: nx.DiGraph) -> nx.DiGraph:
    """The same fabric with its switch-to-switch links made (practically) unlimited.

    The counterfactual that isolates congestion inside the fabric: what remains
    is the traffic's own endpoint (GPU NVLink, PCIe, NIC) bound.
    """
    out = graph.copy()
    for _, _, data in out.edges(data=True):
        if data.get("tier") in CORE_TIERS:
            data["bw_GBps"] = float(data["bw_GBps"]) * UNCONGESTED_FACTOR
    return out
