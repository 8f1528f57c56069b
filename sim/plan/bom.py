"""Bill of materials, checkpointing, power and failures of a design.

Sources and assumptions:

* Failures: Meta's Llama 3 report (Dubey et al. 2024, arXiv:2407.21783, sec. 3.3.4): 419
  unexpected interruptions in a 54-day snapshot on 16,384 H100 GPUs (78 % attributed to
  hardware). Rate per GPU-day = 419 / (54 x 16384) = 4.74e-4, i.e. an interruption every
  ~2.1 GPU-years — applied per GPU (host, NIC and switch faults included, as in the report).
* Checkpoint cadence: Young (1974) / Daly (2006) first-order optimum
  ``sqrt(2 * write_time * MTBF)``.
* Power: GPU board power x count x :data:`HOST_POWER_FACTOR` (CPUs, NICs, fans, switches:
  an HGX H100/H200 system is rated 10.2 kW for 8 x 700 W GPUs, NVIDIA DGX H100 datasheet =
  1.82x) x :data:`PUE` (assumption, 1.2, a modern liquid/air-cooled hall).
* Checkpoint: BF16 weights (2 B) + FP32 master weights and Adam moments (12 B) per parameter
  (MTP included); storage write bandwidth to finish it in :data:`CHECKPOINT_WRITE_S`
  (assumption: 5 minutes of asynchronous write, Megatron ``--async-save``).
* Spares: enough hosts to cover the expected host failures of one repair turnaround
  (:data:`REPAIR_DAYS`, assumption 3 days) at 3 sigma (Poisson), at least one host.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

import networkx as nx

from moesim import topologies
from moesim.hardware import GpuSpec
from moesim.model import ModelConfig, param_counts

LLAMA3_INTERRUPTIONS = 419
LLAMA3_DAYS = 54
LLAMA3_GPUS = 16384
FAILURES_PER_GPU_DAY = LLAMA3_INTERRUPTIONS / (LLAMA3_DAYS * LLAMA3_GPUS)
HOST_POWER_FACTOR = 10200 / (8 * 700)
PUE = 1.2
CHECKPOINT_BYTES_PER_PARAM = 2 + 12
CHECKPOINT_WRITE_S = 300.0
REPAIR_DAYS = 3.0


@dataclass(frozen=True)
class BillOfMaterials:
    """Counts, power, checkpointing and failures (see the module docstring)."""

    gpus: int
    hosts: int
    gpus_per_host: int
    nics: int
    switches: dict[str, int]
    cables: dict[str, int]
    power_mw: float
    checkpoint_bytes: float
    checkpoint_write_s: float
    storage_write_GBps: float
    failures_per_day: float
    mtbf_hours: float
    checkpoint_interval_min: float
    spare_hosts: int

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def bill_of_materials(graph: nx.DiGraph, gpus: int, gpu: GpuSpec,
                      model: ModelConfig) -> BillOfMaterials:
    """The design's bill of materials on ``graph`` for the ``gpus`` it uses."""
    summary = topologies.summarize(graph, bisection=False)
    per_host = int(graph.graph.get("gpus_per_host", 8))
    hosts = math.ceil(gpus / per_host)
    counts = param_counts(model)
    ckpt = (counts.total + counts.mtp) * CHECKPOINT_BYTES_PER_PARAM
    failures = FAILURES_PER_GPU_DAY * gpus
    mtbf_s = 86400.0 / failures
    interval_s = math.sqrt(2 * CHECKPOINT_WRITE_S * mtbf_s)
    host_failures = failures * REPAIR_DAYS
    spares = max(1, math.ceil(host_failures + 3 * math.sqrt(host_failures)))
    return BillOfMaterials(
        gpus=gpus, hosts=hosts, gpus_per_host=per_host, nics=int(summary["nics"]),
        switches=dict(summary["switches"]), cables=dict(summary["cables"]),
        power_mw=gpus * gpu.tdp_w * HOST_POWER_FACTOR * PUE / 1e6,
        checkpoint_bytes=float(ckpt), checkpoint_write_s=CHECKPOINT_WRITE_S,
        storage_write_GBps=ckpt / CHECKPOINT_WRITE_S / 1e9,
        failures_per_day=failures, mtbf_hours=mtbf_s / 3600,
        checkpoint_interval_min=interval_s / 60, spare_hosts=spares,
    )
