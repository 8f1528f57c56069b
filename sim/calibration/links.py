"""Achievable fraction of each link class's line rate (collectives, p2p copies).

Every constant here is listed with its unit, source and kind in
:data:`moesim.calibration.CONSTANTS`.
"""

from __future__ import annotations

from moesim.errors import ConfigError

# --------------------------------------------------------------------------------------
# Achievable fraction of line rate per link class
# --------------------------------------------------------------------------------------

#: NVLink4 on H100 (HGX, 8 GPUs): ~370 GB/s bus bandwidth of 450 GB/s per direction for
#: non-all-reduce collectives (NVIDIA/nccl-tests #212). p2p copies agree: ~380 GB/s one
#: direction (NVIDIA/nccl #1264).
NVLINK_H100_ACHIEVABLE_FRACTION = 370.0 / 450.0

#: NVLink on H800: ~160 GB/s achievable of 200 GB/s per direction (DeepSeek-V3 technical
#: report §3.5; DeepEP intranode kernels reach 153-158 GB/s).
NVLINK_H800_ACHIEVABLE_FRACTION = 160.0 / 200.0

#: NVLink5 (B200, GB200 NVL72, 900 GB/s per direction): 738.48 GB/s, the best HybridEP
#: intranode dispatch (BF16, 8 ranks, 32 SMs, kernel only) measured on GB200 (deepseek-ai/DeepEP
#: PR #420, "Add HybridEP solution for normal mode intranode dispatch/combine", description of
#: 2025-09-21, "GB200 Performance Highlights"): the kernel-time convention of the H100 figure
#: above, with the SM count Megatron-Bridge's performance configs give HybridEP
#: (``moe_hybridep_num_sms = 32``, scripts/performance utils ``_set_common_perf_overrides``;
#: the stored version read is not pinned to a commit). Through the Torch API the same table
#: reads 615.78 GB/s dispatch and 519.57 GB/s combine (0.68 / 0.58 of 900): host-side
#: preparation included, not applied here. Other figures read: NVL72 all-reduce busbw 835-847
#: GB/s (coreweave/nccl-tests PR #43) uses in-switch reduction (NVLS), not comparable;
#: nvbandwidth p2p about 770 GB/s on GB200 (Azure/AI-benchmarking-guide issue #7) is one flow.
NVLINK_BLACKWELL_ACHIEVABLE_FRACTION = 738.48 / 900.0

#: InfiniBand NDR 400 Gb/s (ConnectX-7): 48-49 GB/s of 50 GB/s per NIC in nccl-tests
#: (NVIDIA/nccl-tests #267); midpoint 48.5.
IB_ACHIEVABLE_FRACTION = 48.5 / 50.0

#: RoCEv2 at the same line rate. Assumption, 0.96: NCCL's maintainer puts peak at 24 GB/s
#: per 200 Gb/s NIC (= 0.96 of 25 GB/s, NVIDIA/nccl-tests #119), whatever the medium;
#: on a lossless (PFC/ECN) fabric RoCE pays in latency (3.6 vs 2.8 us, "Insights into
#: DeepSeek-V3" Table 5), which the topology's link latencies carry, not in bandwidth.
ROCE_ACHIEVABLE_FRACTION = 24.0 / 25.0

#: PCIe Gen5 x16 (GPU <-> NIC / host): 52.8 GB/s device-to-host of 64 GB/s raw on H100
#: (NVIDIA/nvbandwidth #24, device_to_host_memcpy_sm). Gen4 agrees: ~25 of 32 GB/s on
#: A100 (ZaidQureshi/bam #54).
PCIE_ACHIEVABLE_FRACTION = 52.8 / 64.0

NVLINK_ACHIEVABLE_FRACTION_BY_GPU: dict[str, float] = {
    "H100": NVLINK_H100_ACHIEVABLE_FRACTION,
    "H800": NVLINK_H800_ACHIEVABLE_FRACTION,
    "H200": NVLINK_H100_ACHIEVABLE_FRACTION,  # same NVLink4 / NVSwitch generation as H100
    "B200": NVLINK_BLACKWELL_ACHIEVABLE_FRACTION,
    "GB200": NVLINK_BLACKWELL_ACHIEVABLE_FRACTION,
    # NVLink3 (A100 300 GB/s, A800 200 GB/s per direction): ASSUMPTION, H100's fraction: the
    # NCCL maintainer puts NVLink protocol overhead at ~20% (nccl-tests #212); no A100
    # all-to-all busbw was read. An A100 80GB all-reduce busbw of ~200 GB/s (nccl-tests #149,
    # one 8-GPU HPE node) would be 0.67 of 300: this may be optimistic for Ampere.
    "A100": NVLINK_H100_ACHIEVABLE_FRACTION,
    "A800": NVLINK_H100_ACHIEVABLE_FRACTION,
}

SCALE_OUT_ACHIEVABLE_FRACTION: dict[str, float] = {
    "ib": IB_ACHIEVABLE_FRACTION,
    "roce": ROCE_ACHIEVABLE_FRACTION,
}

SCALE_OUT_TIERS: tuple[str, ...] = ("nic", "leaf_spine", "spine_core")
LINK_TIERS: tuple[str, ...] = ("nvlink", "pcie", *SCALE_OUT_TIERS)


def link_achievable_fraction(tier: str, fabric: str = "ib", gpu: str = "H100") -> float:
    """Fraction of a link's line rate that collectives achieve on it.

    ``tier`` is the fabric edge's ``tier`` attribute; ``fabric`` ("ib" or "roce") picks the
    scale-out medium; ``gpu`` (preset name, any case) picks the NVLink generation.

    >>> round(link_achievable_fraction("nvlink", gpu="h800"), 3)
    0.8
    >>> link_achievable_fraction("nic", fabric="ib")
    0.97
    """
    if tier == "nvlink":
        key = gpu.upper()
        if key not in NVLINK_ACHIEVABLE_FRACTION_BY_GPU:
            allowed = ", ".join(NVLINK_ACHIEVABLE_FRACTION_BY_GPU)
            raise ConfigError("gpu", f"unknown {gpu!r}; allowed: {allowed}")
        return NVLINK_ACHIEVABLE_FRACTION_BY_GPU[key]
    if tier == "pcie":
        return PCIE_ACHIEVABLE_FRACTION
    if tier in SCALE_OUT_TIERS:
        if fabric not in SCALE_OUT_ACHIEVABLE_FRACTION:
            allowed = ", ".join(SCALE_OUT_ACHIEVABLE_FRACTION)
            raise ConfigError("fabric", f"unknown {fabric!r}; allowed: {allowed}")
        return SCALE_OUT_ACHIEVABLE_FRACTION[fabric]
    raise ConfigError("link.tier", f"unknown {tier!r}; allowed: {', '.join(LINK_TIERS)}")
