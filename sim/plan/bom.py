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
* Goodput (share of wall time that advances training): first-order, as the Young/Daly
  interval assumes, ``1 - write/interval - (interval/2 + restart)/MTBF``: each checkpoint
  costs its write time, each interruption half an interval of lost work plus
  :data:`RESTART_S` (assumption: 15 min to detect, swap the host and reload).
* Network: switches per tier and cables per tier from the fabric graph (one cable per
  port-rate link); optics: two transceivers per switch-to-switch cable and one per NIC
  cable at the switch end (the NIC end: :data:`NIC_OPTICS`, assumption: optical too);
  power of switches and optics from :mod:`moesim.plan.prices` (GPU hosts' power above).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from moesim import topologies
from moesim.hardware import GpuSpec
from moesim.model import ModelConfig, param_counts
from moesim.plan.prices import FAST_PORT_FACTOR, Prices

if TYPE_CHECKING:
    import networkx as nx

LLAMA3_INTERRUPTIONS = 419
LLAMA3_DAYS = 54
LLAMA3_GPUS = 16384
FAILURES_PER_GPU_DAY = LLAMA3_INTERRUPTIONS / (LLAMA3_DAYS * LLAMA3_GPUS)
HOST_POWER_FACTOR = 10200 / (8 * 700)
PUE = 1.2
CHECKPOINT_BYTES_PER_PARAM = 2 + 12
CHECKPOINT_WRITE_S = 300.0
REPAIR_DAYS = 3.0
RESTART_S = 900.0
NIC_OPTICS = 1
DAY_S = 86400.0


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
    goodput: float
    optics: int
    network_power_kw: float
    cost_usd: dict[str, float]
    prices_source: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def goodput(write_s: float, interval_s: float, mtbf_s: float,
            restart_s: float = RESTART_S) -> float:
    """Share of wall time that advances training (module docstring), in [0, 1]."""
    lost = write_s / interval_s + (interval_s / 2 + restart_s) / mtbf_s
    return max(0.0, 1.0 - lost)


def goodput_of(gpus: int) -> float:
    """Goodput of a cluster of ``gpus`` at the Llama 3 interruption rate and the Young/Daly
    checkpoint interval (what :func:`bill_of_materials` reports)."""
    mtbf_s = 86400.0 / (FAILURES_PER_GPU_DAY * gpus)
    return goodput(CHECKPOINT_WRITE_S, math.sqrt(2 * CHECKPOINT_WRITE_S * mtbf_s), mtbf_s)


def _optics(cables: dict[str, int]) -> int:
    return sum(n * (1 + NIC_OPTICS if tier == "nic" else 2) for tier, n in cables.items())


def _costs(gpu: GpuSpec, hosts: int, nics: int, switches: int, optics: int, cables: int,
           port_gbit: float, prices: Prices) -> dict[str, float]:
    fast = FAST_PORT_FACTOR if port_gbit > 400 else 1.0
    return {"hosts": hosts * prices.host(gpu.name), "nics": nics * prices.nic_usd * fast,
            "switches": switches * prices.switch_usd * fast,
            "optics": optics * prices.transceiver_usd * fast,
            "cables": cables * prices.cable_usd}


def bill_of_materials(graph: nx.DiGraph, gpus: int, gpu: GpuSpec, model: ModelConfig,
                      prices: Prices | None = None) -> BillOfMaterials:
    """The design's bill of materials on ``graph`` for the ``gpus`` it uses."""
    prices = prices or Prices()
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
    cables = {k: int(v) for k, v in summary["cables"].items()}
    switches = {k: int(v) for k, v in summary["switches"].items() if k != "nvswitch"}
    optics = _optics(cables)
    net_kw = (sum(switches.values()) * prices.switch_w + optics * prices.transceiver_w) / 1e3
    port_gbit = float(graph.graph.get("port_bw_GBps", 50.0)) * 8
    costs = _costs(gpu, hosts, int(summary["nics"]), sum(switches.values()), optics,
                   sum(cables.values()), port_gbit, prices)
    costs["total"] = sum(costs.values())
    return BillOfMaterials(
        gpus=gpus, hosts=hosts, gpus_per_host=per_host, nics=int(summary["nics"]),
        switches=switches, cables=cables,
        power_mw=(gpus * gpu.tdp_w * HOST_POWER_FACTOR + net_kw * 1e3) * PUE / 1e6,
        checkpoint_bytes=float(ckpt), checkpoint_write_s=CHECKPOINT_WRITE_S,
        storage_write_GBps=ckpt / CHECKPOINT_WRITE_S / 1e9,
        failures_per_day=failures, mtbf_hours=mtbf_s / 3600,
        checkpoint_interval_min=interval_s / 60, spare_hosts=spares,
        goodput=goodput(CHECKPOINT_WRITE_S, interval_s, mtbf_s), optics=optics,
        network_power_kw=net_kw, cost_usd=costs, prices_source=prices.source,
    )
