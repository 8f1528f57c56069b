"""Kernel-level calibration: GEMM efficiency, sustained clocks, attention, launch, HBM.

Every constant here is listed with its unit, source and kind in
:data:`moesim.calibration.CONSTANTS`.
"""

from __future__ import annotations

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
    # Ampere (A100, A800: 400 W): no MSMF is published; ASSUMPTION: the same power-limited
    # clock drop as Hopper's (the mechanism, a saturated run holding the clock the board
    # power allows, is the same; its size on GA100 is not measured).
    "A100": SUSTAINED_FRACTION_HOPPER,
    "A800": SUSTAINED_FRACTION_HOPPER,
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

#: DeepEP V1's ``NUM_MAX_NVL_PEERS`` (deepseek-ai/DeepEP csrc/kernels/configs.cuh @9e6c4ef5; in
#: csrc/deep_ep.cpp as ``rdma_rank = rank / NUM_MAX_NVL_PEERS``): its normal kernels forward a
#: token over NVLink among at most 8 ranks, EP ranks ``8k .. 8k+7`` being one RDMA rank,
#: whatever the NVLink domain (on NVL72 it forwards within runs of 8).
DEEPEP_NVL_PEERS = 8

#: Bytes before the payload of each DeepEP low-latency dispatch message: ``sizeof(int4)``, the
#: source token index and three reserved ints (deepseek-ai/DeepEP csrc/kernels/internode_ll.cu
#: @005dcc9d, ``num_bytes_per_msg``); tests/test_low_latency.py @058d696b counts it in its
#: bandwidth (``hidden + hidden / 128 * 4 + 16`` per FP8 selection).
LL_MESSAGE_HEADER_BYTES = 16

#: Metadata bytes in every token slot DeepEP V1's internode normal kernels move, over RDMA and
#: on the NVLink forwarding leg alike: ``get_num_bytes_per_token`` packs the hidden state, the
#: FP8 scales, one ``SourceMeta`` (two ints: the source RDMA rank and a bitmask of the NVLink
#: ranks that need the token), then the top-k indices and weights (4 B each; none in a cached
#: dispatch, nor in a combine given no weights), and rounds the slot up to
#: :data:`DEEPEP_TOKEN_ALIGN_BYTES` (deepseek-ai/DeepEP csrc/kernels/internode.cu @008e399e;
#: the RDMA put is ``num_bytes_per_token x num_tokens_to_issue``, the forwarder's TMA copy
#: ``num_bytes_per_token``).
DEEPEP_SOURCE_META_BYTES = 8

#: ``sizeof(int4)``: DeepEP V1's internode token slots are whole multiples of it (same source).
DEEPEP_TOKEN_ALIGN_BYTES = 16

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
# Quantisation kernels of FP8 training (per precision; see moesim.hardware.precision)
# --------------------------------------------------------------------------------------

#: HBM bytes per element of one FP8 per-tensor current-scaling quantisation (Transformer
#: Engine ``Float8CurrentScaling``: "one FP32 scale factor per tensor" computed from the tensor
#: itself, docs ``features/low_precision_training/fp8_current_scaling``): an amax pass (read the
#: BF16 tensor, 2 B), then a cast-transpose pass (read 2 B, write the row-wise FP8 copy and the
#: column-wise one the wgrad GEMM needs, 1 B each): 6 B in 2 kernels. Assumption: counted from
#: the recipe (two passes, both copies), not measured.
FP8_CURRENT_SCALING_CAST_BYTES = 2.0 + 2.0 + 2 * 1.0

#: The same for FP8 blockwise scaling (TE ``Float8BlockScaling``, DeepSeek-V3's recipe,
#: arXiv:2412.19437 section 3.3.2: 1x128 activation tiles, 128x128 weight blocks, FP32 scales):
#: one fused pass reads 2 B and writes both FP8 copies with one 4-byte scale per 128 elements
#: each: 2 + 2 x (1 + 4/128) B in 1 kernel. Assumption: counted from the format.
FP8_BLOCK_CAST_BYTES = 2.0 + 2 * (1.0 + 4.0 / 128)

#: The same for MXFP8 (TE ``MXFP8BlockScaling``, OCP Microscaling spec v1.0: 32 consecutive
#: elements share one 1-byte E8M0 scale; Blackwell tensor cores read them natively): one pass
#: reads 2 B and writes the row-wise and column-wise copies, 1 + 1/32 B each, in 1 kernel.
#: Assumption: counted from the format.
MXFP8_CAST_BYTES = 2.0 + 2 * (1.0 + 1.0 / 32)

#: FP8 blockwise weight-gradient GEMMs (``dW = X^T dY`` with both operands scaled per 1 x 128
#: group along the token dimension, DeepSeek-V3 report arXiv:2412.19437 section 3.3.2, so each
#: promotion to the FP32 accumulators multiplies by a per-row x per-column scale product):
#: the TFLOPS DeepGEMM's ``wgrad_gemm_fp8_fp8_fp32_nt`` reached on H800 for DeepSeek-V3's
#: weight shapes, deepseek-ai/DeepGEMM PR #95 (merged 2025-05, "Weight gradient GEMMs for dense
#: models" table: six shapes at K = 4096 tokens, three at 8192).
FP8_BLOCK_WGRAD_TFLOPS_H800 = (920.0, 986.0, 878.0, 994.0, 942.0, 920.0, 1052.0, 1092.0, 1014.0)

#: What fraction of the sustained FP8 GEMM rate an FP8 blockwise wgrad kernel reaches: the
#: median of :data:`FP8_BLOCK_WGRAD_TFLOPS_H800` (986) over H800's sustained FP8 rate in this
#: model, 1402.6 (MAMF) x 698.6 / 823.9 (Hopper sustained fraction) = 1189.29 TFLOPS (tested
#: equal to ``roofline.sustained_tflops(H800, "fp8")``): 0.83 (the nine shapes: 0.74 to 0.92, rising
#: with the token count). Applied to every wgrad kernel of an ``fp8-block`` layer, on any GPU
#: (measured on H800 only) and to the routed experts' grouped wgrads (the PR's MoE table is
#: not used here). The PR states DeepGEMM's kernels are ~20% faster than DeepSeek's internal
#: CUTLASS ones, which a run before 2025-05 (DeepSeek-V3's) used: not applied (no measured
#: rate of those).
FP8_BLOCK_WGRAD_FRACTION = sorted(FP8_BLOCK_WGRAD_TFLOPS_H800)[4] / 1189.29

# --------------------------------------------------------------------------------------
# Dropless MoE host synchronisation
# --------------------------------------------------------------------------------------

#: GPU idle time per MoE layer forward of a dropless (token-count dependent) dispatch. The host
#: needs the per-expert token counts to size the all-to-all and the grouped GEMM, so it copies
#: them device-to-host and waits ("the token dispatcher includes a tensor.cpu() call",
#: NVIDIA/Megatron-LM issue #1598; "device-to-host copies and host-side synchronization on every
#: step", Megatron-LM PR #2368; DeepEP normal kernels wait on the CPU for the received count,
#: deepseek-ai/DeepEP issue #170). The stream drains, and the GPU idles until the host has
#: read the counts and launched the next kernel. Assumption, 20 us: a D2H copy round trip plus
#: one host-side op dispatch and kernel launch, each a few microseconds (kernel submission
#: 4-6 us measured, susun-blog.com "pegainfer (3): From Launch Overhead to CUDA Graph").
#: Charged once per MoE layer forward (the backward reuses the counts).
DROPLESS_SYNC_S = 20e-6

# --------------------------------------------------------------------------------------
# Host launch cost: both ends of the reported band (moesim.step.host), not in the step
# --------------------------------------------------------------------------------------

#: Host seconds per kernel launch, low end of the published range (measured): the CUDA
#: driver call alone, ``cudaLaunchKernel`` median 4.58 us CPU over 197,809 calls (kekzl/imp
#: PR #1367, Nsight Systems, a C++ inference engine). Used only by the host-launch band.
HOST_LAUNCH_LOW_S = 4.58e-6

#: Host seconds per kernel launch, high end (measured): a whole eager PyTorch model per
#: launch, 53.7 ms of host time for 1185 launches with the GPU busy 7.27 ms of it (45.3 us;
#: facebookresearch/sam2 issue #768, A6000, PyTorch 2.6, 1407 allocator calls included). No
#: host time per GroupedLinear call or per MoE layer of Megatron-Core + Transformer Engine was
#: found (searched 2026-12-03; :mod:`moesim.step.host` lists what was read), so the band keeps
#: both ends and no value between. Used only by the host-launch band.
HOST_LAUNCH_HIGH_S = 53.7e-3 / 1185
