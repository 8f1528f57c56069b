"""Fabric topologies as ``networkx.DiGraph`` data; imports nothing else of the project.

The builders write into a :class:`~moesim.topologies.table.LinkGraph` (lists and arrays) and
return its ``to_networkx()``; ``registry.load_preset_table`` gives the LinkGraph itself, which
the simulator's fast path reads without importing networkx.

Schema (consumed by the simulator's engine):

* Graph attributes: ``name``, ``family``, ``gpus_per_host``, ``nvlink_domain_size``,
  ``fabric`` ("ib" | "roce"), plus ``gpu``, ``hosts``, ``port_bw_GBps`` and per-family
  sizes (``spines``, ``pods``, ``cores``, ``planes``, ...).
* Node ``kind`` in gpu, nvswitch, nic, leaf, spine, core. GPUs carry ``gpu`` (global index,
  host-major: host h local i -> h * gpus_per_host + i), ``host``, ``local``, ``domain``
  (NVLink domain). NICs carry ``host``, ``rail`` (and ``plane`` on multi-plane fabrics).
  Switches carry ``tier`` (nvswitch 0, leaf 1, spine 2, core 3) and, where relevant,
  ``rail``, ``su``, ``plane``, ``pod``, ``group``.
* Every physical full-duplex link is two directed edges carrying ``bw_GBps`` (GB/s, one
  direction, line rate), ``latency_ns`` and ``tier`` (link class: nvlink, pcie, nic,
  leaf_spine, spine_core).
* Node names: ``h3/gpu5``, ``h3/nvsw`` (HGX), ``rack0/nvsw`` (NVL72), ``h3/nic5``,
  ``leaf.r5.su0``, ``spine.2`` / ``spine.p1.2`` (rail), ``leaf.pl3.0`` / ``spine.pl3.1``
  (multi-plane), ``edge.p0.1`` / ``agg.p0.1`` (k-ary fat tree), ``core.0``.
"""

from __future__ import annotations

from moesim.topologies.constants import LATENCY, LatencyProfile, NVLINK_BW_GBps
from moesim.topologies.errors import TopologyError
from moesim.topologies.fat_tree import fat_tree
from moesim.topologies.faults import apply_faults
from moesim.topologies.hgx import hgx_node
from moesim.topologies.mpft import multi_plane_fat_tree
from moesim.topologies.nvl72 import nvl72
from moesim.topologies.rail import RailSpec, rail_fat_tree
from moesim.topologies.registry import TOPOLOGIES, build, load_preset, preset_names, register
from moesim.topologies.summary import bisection_GBps, equal_cost_paths, gpu_nodes, summarize

if __name__ != "moesim.topologies":  # topologies/ is not a top-level name
    raise ImportError("import moesim.topologies: moesim installs topologies/ under its own name")

__all__ = [
    "LATENCY",
    "TOPOLOGIES",
    "LatencyProfile",
    "NVLINK_BW_GBps",
    "RailSpec",
    "TopologyError",
    "apply_faults",
    "bisection_GBps",
    "build",
    "equal_cost_paths",
    "fat_tree",
    "gpu_nodes",
    "hgx_node",
    "load_preset",
    "multi_plane_fat_tree",
    "nvl72",
    "preset_names",
    "rail_fat_tree",
    "register",
    "summarize",
]
