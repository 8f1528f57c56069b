"""Line rates and latencies of the links every fabric is built from, with sources.

Bandwidths are line rates in GB/s (1e9 B/s) in ONE direction; the simulator applies
achievable-bandwidth calibration factors per link tier, so nothing is derated here.

NVLink per GPU, per direction (NVIDIA datasheets, as tabulated in stas00/ml-engineering
``compute/accelerator/README.md``; H800 from the DeepSeek-V3 technical report §3.5):

* H100 / H200 SXM: NVLink4, 900 GB/s bidirectional -> 450 GB/s per direction
* H800 SXM: 400 GB/s bidirectional -> 200 GB/s (about 160 achievable, DeepSeek-V3 §3.5)
* B200 (HGX): NVLink5, 1.8 TB/s bidirectional -> 900 GB/s
* GB200 (NVL72): 900 GB/s per direction, 72-GPU NVLink domain
* A100 SXM4: NVLink3, 600 GB/s bidirectional -> 300 GB/s; A800 SXM4: 400 GB/s
  bidirectional -> 200 GB/s. HGX A100 hosts carry PCIe Gen4 x16 (32 GB/s) to 200 Gb/s HDR
  NICs: pass ``nic_gbit: 200``; the GPU-NIC hop is still built at Gen5's 64 GB/s
  (:func:`pcie_bw_for` picks by NIC rate), which never binds behind a 25 GB/s NIC.

GPU <-> NIC: PCIe Gen5 x16 = 32 GT/s x 16 lanes / 8 = 64 GB/s per direction raw signalling
(63.0 GB/s after 128b/130b encoding; PCI-SIG PCIe 5.0 base specification). A NIC faster
than that (ConnectX-8, 800 Gb/s = 100 GB/s) sits on PCIe Gen6 x16: 64 GT/s x 16 / 8 =
128 GB/s per direction (PCI-SIG PCIe 6.0); the builders pick the first that carries the NIC.

NIC: ConnectX-7 NDR 400 Gb/s = 50 GB/s per direction (48-49 GB/s achievable in
nccl-tests, NVIDIA/nccl-tests #267). One CX7 per GPU on HGX/DGX H100/H800/H200/B200.

Switch radix: 64 ports of 400 Gb/s (NVIDIA Quantum-2 QM9700, 32 OSFP cages x 2 NDR ports);
used only to size default spine/core counts.

Latency (64 B message, CPU end to end; "Insights into DeepSeek-V3", ISCA'25, Table 5):
IB 2.8 us same leaf / 3.7 us cross leaf; RoCE 3.6 us / 5.6 us; NVLink 3.33 us.
Split onto links (paths: same leaf = pcie+nic+nic+pcie; cross leaf adds leaf_spine twice;
NVLink = gpu->nvswitch->gpu):

* ``nvlink`` 1665 ns each (3.33 us / 2), both fabrics.
* ``pcie`` 1000 ns each, both fabrics: the host-side share (PCIe, NIC processing, software)
  is assumed equal for IB and RoCE, 2 x 1000 ns per message. This split is our assumption:
  the table only gives end-to-end figures.
* ``nic`` (NIC <-> leaf, includes the leaf traversal): IB (2800 - 2000) / 2 = 400 ns,
  RoCE (3600 - 2000) / 2 = 800 ns.
* ``leaf_spine``: IB (3700 - 2800) / 2 = 450 ns, RoCE (5600 - 3600) / 2 = 1000 ns.
* ``spine_core``: not measured; assumed equal to ``leaf_spine`` (one more switch hop).

Path sums reproduce the table exactly (tested).
"""

from __future__ import annotations

from dataclasses import dataclass

NVLINK_BW_GBps: dict[str, float] = {
    "H100": 450.0,
    "H800": 200.0,
    "H200": 450.0,
    "B200": 900.0,
    "GB200": 900.0,
    "A100": 300.0,
    "A800": 200.0,
}
HGX_GPUS: tuple[str, ...] = ("H100", "H800", "H200", "B200", "A100", "A800")
NVL72_GPUS: tuple[str, ...] = ("GB200",)

PCIE_GEN5_X16_BW_GBps = 64.0
PCIE_GEN6_X16_BW_GBps = 128.0
CX7_GBIT = 400.0
"""ConnectX-7 line rate, Gbit/s per direction (50 GB/s)."""
BITS_PER_BYTE = 8
SWITCH_RADIX = 64
FABRICS: tuple[str, ...] = ("ib", "roce")

NVLINK_LATENCY_NS = 1665.0
PCIE_LATENCY_NS = 1000.0


@dataclass(frozen=True)
class LatencyProfile:
    """Per-link latency (ns) for each link class of one scale-out fabric."""

    nvlink_ns: float
    pcie_ns: float
    nic_ns: float
    leaf_spine_ns: float
    spine_core_ns: float


LATENCY: dict[str, LatencyProfile] = {
    "ib": LatencyProfile(NVLINK_LATENCY_NS, PCIE_LATENCY_NS, 400.0, 450.0, 450.0),
    "roce": LatencyProfile(NVLINK_LATENCY_NS, PCIE_LATENCY_NS, 800.0, 1000.0, 1000.0),
}


def pcie_bw_for(nic_bw_GBps: float) -> float:
    """GPU <-> NIC PCIe x16 line rate: Gen5 unless the NIC outruns it, then Gen6."""
    if nic_bw_GBps <= PCIE_GEN5_X16_BW_GBps:
        return PCIE_GEN5_X16_BW_GBps
    return PCIE_GEN6_X16_BW_GBps


def gbit_to_GBps(gbit: float) -> float:
    """A line rate in Gbit/s as GB/s (gigabytes per second): 400 Gbit/s is 50 GB/s."""
    return float(gbit) / BITS_PER_BYTE
