"""Calibration constants: the one place where measured or assumed efficiencies live.

Every number the compute and network models use beyond a datasheet line rate is a
module-level constant here, with its public source (or the words "assumption" and the
reason) beside it. :data:`CONSTANTS` lists them all (name, value, unit, source) so reports
can print what a result was calibrated with. Datasheet numbers of the GPUs themselves live
in :mod:`moesim.hardware.gpus`; link line rates and latencies live in
``moesim.topologies.constants``.

Link classes follow the ``tier`` attribute of fabric edges: ``nvlink``, ``pcie``, and the
scale-out tiers ``nic``, ``leaf_spine``, ``spine_core`` whose medium is the fabric's
``ib`` (InfiniBand) or ``roce`` (RoCEv2 Ethernet).
"""

from __future__ import annotations

from dataclasses import dataclass

from moesim.errors import ConfigError

# --------------------------------------------------------------------------------------
# GEMM efficiency curve (used by moesim.hardware.roofline)
# --------------------------------------------------------------------------------------

#: Smallest row block a tensor-core GEMM computes: Hopper's warpgroup MMA instruction is
#: ``wgmma.mma_async`` of shape m64nNk16 (PTX ISA, "Asynchronous Warpgroup Level Matrix
#: Multiply-Accumulate"); Blackwell's tcgen05 MMA also starts at M=64. A GEMM with fewer
#: rows (few tokens) still pays for 64.
GEMM_MIN_ROWS = 64

#: Output tile of one CTA. Assumption of a representative choice: 128 x 256 is a common
#: Hopper BF16 tile in CUTLASS 3.x and DeepGEMM kernels (the brief's 128x128 / 128x256).
#: Used only to size the smallest work unit one SM takes (see moesim.hardware.roofline).
GEMM_TILE_M = 128
GEMM_TILE_N = 256

#: Smallest slice of the reduction dimension one SM takes when a GEMM is split over K
#: (split-K / stream-K, Osama et al., "Stream-K", PPoPP'23): 4 main-loop iterations of
#: BLK_K = 64. Assumption: below that the partial-sum fix-up costs more than it saves.
GEMM_SPLIT_K_MIN = 256

# --------------------------------------------------------------------------------------
# Sustained tensor-core throughput (the board power limit)
# --------------------------------------------------------------------------------------

#: Sustained / burst throughput of tensor-core kernels on Hopper (H100, H800, H200: one
#: GH100 die, 700 W). A training step is one long saturated run: its GEMMs hold the clock
#: the power limit allows, not the boost clock a short benchmark catches. MAMF (the GEMM
#: ceiling in :mod:`moesim.hardware.gpus`) and the flash-attention figures below are such
#: bursts. mamf-finder measures both regimes: "MSMF (Maximum Sustainable Matmul FLOPS) - the
#: power-saturated, sustained rate that matches real training throughput". H200 BF16, all 8
#: GPUs of the board computing, 5 rounds (n = 40): MSMF 698.6 TFLOP/s at 1405-1527 MHz,
#: MAMF 823.9 in the same runs (stas00/ml-engineering ``compute/accelerator/benchmarks/
#: README.md``, "What we measured: alone vs all-8 concurrent", the revision that added MSMF;
#: torch 2.14.0.dev20260810+cu130). Applied to the H100 / H800 MAMF (same die and power limit;
#: no H100 MSMF is published) and, as the same clock drop, to attention kernels and to FP8
#: GEMMs (no FP8 MSMF is published; assumption).
SUSTAINED_FRACTION_HOPPER = 698.6 / 823.9

#: The same on Blackwell: B200 BF16 (1000 W), all 8 GPUs computing, n = 40: MSMF 1426.4,
#: MAMF 1751.2 (same README and table, torch 2.13.0+cu130). GB200 (1200 W): no figure;
#: assumption: as B200.
SUSTAINED_FRACTION_BLACKWELL = 1426.4 / 1751.2

SUSTAINED_FRACTION_BY_GPU: dict[str, float] = {
    "H100": SUSTAINED_FRACTION_HOPPER,
    "H800": SUSTAINED_FRACTION_HOPPER,
    "H200": SUSTAINED_FRACTION_HOPPER,
    "B200": SUSTAINED_FRACTION_BLACKWELL,
    "GB200": SUSTAINED_FRACTION_BLACKWELL,
}


def sustained_fraction(gpu: str) -> float:
    """Sustained / burst tensor-core throughput of GPU preset ``gpu`` (any case).

    >>> round(sustained_fraction("h100"), 3)
    0.848
    """
    key = gpu.upper()
    if key not in SUSTAINED_FRACTION_BY_GPU:
        allowed = ", ".join(SUSTAINED_FRACTION_BY_GPU)
        raise ConfigError("gpu", f"unknown {gpu!r}; allowed: {allowed}")
    return SUSTAINED_FRACTION_BY_GPU[key]


# --------------------------------------------------------------------------------------
# Communication SM costs
# --------------------------------------------------------------------------------------

#: SMs an all-to-all dispatcher holds while compute runs beside it. DeepSeek-V3 (technical
#: report, arXiv:2412.19437, section 3.2.2): DualPipe overlaps one chunk's dispatch and combine
#: with another chunk's compute, and its all-to-all kernels "partition 20 SMs into 10
#: communication channels" of the H800's 132; "only 20 SMs are sufficient to fully utilize the
#: bandwidths of IB and NVLink". The compute of an overlapped forward/backward pair runs on
#: the other SMs (:mod:`moesim.step.program`), so its kernels take ``sm_count / (sm_count - 20)``
#: as long: proportional to SMs, an upper bound if the power limit hands part of it back as
#: clock. An all-to-all that nothing overlaps (Megatron's alltoall dispatcher waits for it)
#: takes no SMs from compute.
OVERLAP_DISPATCHER_SMS = 20

# --------------------------------------------------------------------------------------
# Kernel launch and memory
# --------------------------------------------------------------------------------------

#: Fixed cost charged once per kernel. Assumption, 3 us: each launch costs "on the order
#: of microseconds" (Modal GPU Glossary, "CUDA Graph"; the CUDA Programming Guide §4.2
#: describes the per-kernel host setup cost that graphs remove). In a training step the
#: host usually runs ahead, so what remains on the GPU timeline is the gap between
#: back-to-back kernels, of the same order.
KERNEL_LAUNCH_OVERHEAD_S = 3.0e-6

#: Achievable fraction of datasheet HBM bandwidth for streaming kernels: a vectorised copy
#: kernel on H100 SXM saturates at 2.80-2.82 TB/s of 3.35 TB/s = 0.84 (vllm-project/vllm
#: PR #48110 measurements). Datasheet bandwidth is never reached (ECC, refresh, row
#: switches). Applied to all GPUs (assumption for H200/B200/GB200).
HBM_ACHIEVABLE_FRACTION = 0.84

# --------------------------------------------------------------------------------------
# Attention core (flash-attention style kernels)
# --------------------------------------------------------------------------------------

#: Forward attention throughput as a fraction of dense datasheet peak. 0.60: cuDNN
#: flash-attention forward on H100, head dim 128, seq 8192, reaches 582 TFLOP/s = 0.59 of
#: 989 (meta-pytorch/tritonbench #141); FlashAttention-3 reaches up to 740 = 0.75 only at
#: head dim 256 (Shah et al. 2024, arXiv:2407.08608); FA4 on B200, head dim 128, causal,
#: seq 8192: 1418 TFLOP/s = 0.63 of 2250 (Dao-AILab/flash-attention PR #2280). cuDNN is the
#: kernel Megatron-Core runs on Hopper: Transformer Engine's ``get_attention_backend``
#: disables FlashAttention "to give FusedAttention preference on Hopper+". Optimistic for
#: causal masks at short sequences: FA4 causal / non-causal at hd 128, seq 4096 is 0.80
#: (PR #2605 table), no H100 figure for causal seq 4096 found.
ATTENTION_FWD_EFFICIENCY = 0.60

#: Backward attention throughput as a fraction of dense peak. 0.45: FA4 backward on B200
#: (head dim 128, causal, seq 8192) 1118-1209 TFLOP/s = 0.50-0.54 of 2250 (PR #2280);
#: FA3 backward on H100 was measured lower, ~305 TFLOP/s at 32k (flash-attention #1051).
ATTENTION_BWD_EFFICIENCY = 0.45

#: Backward attention FLOPs per forward FLOP: 5 matmuls (recompute S, dV, dP, dQ, dK) against
#: 2 in the forward; the flash-attention benchmarks count backward as 2.5 x forward.
ATTENTION_BWD_FLOPS_FACTOR = 2.5

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

#: NVLink5 (B200, GB200 NVL72): no published non-all-reduce figure; assumption: same
#: fraction as NVLink4 on H100. (NVL72 all-reduce busbw 835-847 GB/s at 8 GiB, coreweave
#: nccl-tests PR #43, uses in-switch reduction and is not comparable.)
NVLINK_BLACKWELL_ACHIEVABLE_FRACTION = NVLINK_H100_ACHIEVABLE_FRACTION

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


# --------------------------------------------------------------------------------------
# The table for reports
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class CalibrationConstant:
    """One row of :data:`CONSTANTS`: a named constant, its unit and where it comes from."""

    name: str
    value: float
    unit: str
    source: str


def _row(name: str, unit: str, source: str) -> tuple[str, CalibrationConstant]:
    return name, CalibrationConstant(name, float(globals()[name]), unit, source)


CONSTANTS: dict[str, CalibrationConstant] = dict(
    [
        _row("GEMM_MIN_ROWS", "rows", "PTX ISA wgmma shape m64nNk16"),
        _row("GEMM_TILE_M", "rows", "assumption: common Hopper CTA tile 128x256"),
        _row("GEMM_TILE_N", "cols", "assumption: common Hopper CTA tile 128x256"),
        _row("GEMM_SPLIT_K_MIN", "elements", "assumption: 4 x BLK_K=64 (Stream-K, PPoPP'23)"),
        _row("SUSTAINED_FRACTION_HOPPER", "x burst", "H200 BF16 8 GPUs busy: MSMF 698.6 / "
             "MAMF 823.9 (stas00/ml-engineering benchmarks README, MSMF)"),
        _row("SUSTAINED_FRACTION_BLACKWELL", "x burst", "B200 BF16 8 GPUs busy: MSMF 1426.4 / "
             "MAMF 1751.2 (stas00/ml-engineering benchmarks README, MSMF)"),
        _row("OVERLAP_DISPATCHER_SMS", "SMs", "DeepSeek-V3 report 3.2.2: 20 of 132 SMs run "
             "the overlapped all-to-all"),
        _row("KERNEL_LAUNCH_OVERHEAD_S", "s", "assumption: launch ~ microseconds (Modal GPU "
             "Glossary; CUDA Programming Guide 4.2)"),
        _row("HBM_ACHIEVABLE_FRACTION", "fraction", "H100 copy kernel 2.8 of 3.35 TB/s "
             "(vllm-project/vllm #48110)"),
        _row("ATTENTION_FWD_EFFICIENCY", "fraction of peak", "cuDNN FA fwd H100 582 TFLOP/s "
             "(tritonbench #141); FA4 B200 0.63 (flash-attention #2280)"),
        _row("ATTENTION_BWD_EFFICIENCY", "fraction of peak", "FA4 bwd B200 0.50-0.54 "
             "(flash-attention #2280); FA3 H100 lower (#1051)"),
        _row("ATTENTION_BWD_FLOPS_FACTOR", "x forward", "5 vs 2 matmuls; flash-attention "
             "benchmarks"),
        _row("NVLINK_H100_ACHIEVABLE_FRACTION", "fraction", "370 of 450 GB/s "
             "(NVIDIA/nccl-tests #212)"),
        _row("NVLINK_H800_ACHIEVABLE_FRACTION", "fraction", "160 of 200 GB/s "
             "(DeepSeek-V3 report 3.5)"),
        _row("NVLINK_BLACKWELL_ACHIEVABLE_FRACTION", "fraction", "assumption: as H100"),
        _row("IB_ACHIEVABLE_FRACTION", "fraction", "48-49 of 50 GB/s CX7 NDR "
             "(NVIDIA/nccl-tests #267)"),
        _row("ROCE_ACHIEVABLE_FRACTION", "fraction", "assumption: 24 GB/s per 200G NIC "
             "(NVIDIA/nccl-tests #119)"),
        _row("PCIE_ACHIEVABLE_FRACTION", "fraction", "52.8 of 64 GB/s Gen5 x16 on H100 "
             "(NVIDIA/nvbandwidth #24)"),
    ]
)
