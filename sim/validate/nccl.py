"""nccl-tests ``alltoall_perf`` baselines on H100, simulated as one uniform all-to-all.

nccl-tests (``doc/PERFORMANCE.md``): each rank sends ``S`` bytes in all, ``S / n`` to every
rank (itself included); ``algBw = S / time`` and, for all-to-all, ``busBw = algBw x (n - 1)
/ n`` (NVIDIA/nccl-tests #267, #130).

Both cases are CONSISTENCY checks, not validations: the achievable fractions they are
compared against (NVLink 370/450 from nccl-tests #212, IB 48.5/50 from #267) are the very
calibration inputs of :mod:`moesim.calibration`. What they check is everything between the
constant and the printed number: fabric, routing (PXN across nodes, as NCCL does by
default on rail-optimized fabrics), max-min sharing and the busBw arithmetic.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from moesim import topologies
from moesim.calibration import KERNEL_LAUNCH_OVERHEAD_S
from moesim.validate.flows import FlowBatch, run_flows

GIB = 2**30


@dataclass(frozen=True)
class AllToAllResult:
    """One simulated ``alltoall_perf`` point."""

    time_s: float
    alg_bw_GBps: float
    bus_bw_GBps: float
    nic_bw_GBps: float  # mean bytes each NIC sent into the fabric / time (0 on one node)


def uniform_alltoall(n_gpus: int, size_bytes: float) -> FlowBatch:
    """Every rank sends ``size_bytes / n`` to every other rank (the self share stays local)."""
    src, dst = np.indices((n_gpus, n_gpus))
    off = src != dst
    return FlowBatch(src[off], dst[off], np.full(int(off.sum()), size_bytes / n_gpus))


def simulate_alltoall(hosts: int, size_bytes: float = GIB) -> AllToAllResult:
    """``alltoall_perf`` on ``hosts`` HGX H100 (1: one NVSwitch node; more: rail fat tree)."""
    if hosts == 1:
        graph = topologies.load_preset("hgx-h100")
    else:
        graph = topologies.rail_fat_tree(hosts, gpu="H100")
    n = hosts * 8
    run = run_flows(graph, uniform_alltoall(n, size_bytes), pxn=hosts > 1)
    time_s = run.time_s + KERNEL_LAUNCH_OVERHEAD_S
    alg = size_bytes / time_s / 1e9
    nic_out = run.fabric.tier == "nic"
    nic_out &= run.fabric.node_kind[run.fabric.link_src] == "nic"
    nic_bytes = run.link_bytes[nic_out]
    nic = float(nic_bytes.mean()) / time_s / 1e9 if nic_bytes.size else 0.0
    return AllToAllResult(time_s=time_s, alg_bw_GBps=alg, bus_bw_GBps=alg * (n - 1) / n,
                          nic_bw_GBps=nic)
