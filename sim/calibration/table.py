"""The calibration registry: every constant with its value, unit, source and kind.

``kind`` is ``measured`` (a published measurement, named with its issue / PR / document
revision) or ``assumption`` (an engineering choice, with the reason in the defining module).
A constant is never chosen, or switched between sources, because a validation case then
passes; a commit that changes one regenerates ``moesim validate --write-band`` and lists in
its message every case whose error moved (``sim/results/band.json`` diff).
"""

from __future__ import annotations

from dataclasses import dataclass

from moesim.calibration import kernels, links, training
from moesim.errors import ConfigError

KINDS = ("measured", "assumption")


@dataclass(frozen=True)
class CalibrationConstant:
    """One row of :data:`CONSTANTS`."""

    name: str
    value: float
    unit: str
    source: str
    kind: str

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ConfigError("calibration.kind", f"unknown {self.kind!r}; allowed: "
                              + ", ".join(KINDS))


_MODULES = (kernels, links, training)

_ROWS: tuple[tuple[str, str, str, str], ...] = (
    ("GEMM_MIN_ROWS", "rows", "PTX ISA 8.x wgmma shape m64nNk16 (CUDA 12.x)", "measured"),
    ("GEMM_TILE_M", "rows", "common Hopper CTA tile 128x256 (CUTLASS 3.x, DeepGEMM)",
     "assumption"),
    ("GEMM_TILE_N", "cols", "common Hopper CTA tile 128x256 (CUTLASS 3.x, DeepGEMM)",
     "assumption"),
    ("GEMM_SPLIT_K_MIN", "elements", "4 x BLK_K=64 (Stream-K, PPoPP'23)", "assumption"),
    ("SUSTAINED_FRACTION_HOPPER", "x burst", "H200 BF16, 8 GPUs busy: MSMF 698.6 / MAMF 823.9 "
     "(stas00/ml-engineering compute/accelerator/benchmarks/README.md, revision adding MSMF; "
     "torch 2.14.0.dev20260810+cu130); applied to H100/H800", "measured"),
    ("SUSTAINED_FRACTION_BLACKWELL", "x burst", "B200 BF16, 8 GPUs busy: MSMF 1426.4 / MAMF "
     "1751.2 (same README; torch 2.13.0+cu130); GB200 as B200 (assumption)", "measured"),
    ("OVERLAP_DISPATCHER_SMS", "SMs", "DeepSeek-V3 technical report arXiv:2412.19437v1 "
     "section 3.2.2: 20 of 132 SMs", "measured"),
    ("DEEPEP_NVL_PEERS", "ranks", "NUM_MAX_NVL_PEERS (deepseek-ai/DeepEP csrc/kernels/configs.cuh "
     "@9e6c4ef5; "
     "csrc/deep_ep.cpp rdma_rank = rank / NUM_MAX_NVL_PEERS, V1)", "measured"),
    ("LL_MESSAGE_HEADER_BYTES", "B/message", "sizeof(int4) before each low-latency dispatch "
     "message (deepseek-ai/DeepEP csrc/kernels/internode_ll.cu @005dcc9d; "
     "tests/test_low_latency.py @058d696b)", "measured"),
    ("DEEPEP_SOURCE_META_BYTES", "B/token", "sizeof(SourceMeta), two ints, in every internode "
     "normal-kernel token slot (deepseek-ai/DeepEP csrc/kernels/internode.cu @008e399e, "
     "get_num_bytes_per_token)", "measured"),
    ("DEEPEP_TOKEN_ALIGN_BYTES", "B", "internode normal-kernel token slots rounded up to "
     "sizeof(int4) (same file and function)", "measured"),
    ("KERNEL_LAUNCH_OVERHEAD_S", "s", "launch ~ microseconds (Modal GPU Glossary; CUDA "
     "Programming Guide 12.x section 4.2)", "assumption"),
    ("HBM_ACHIEVABLE_FRACTION", "fraction", "H100 SXM copy kernel 2.80-2.82 of 3.35 TB/s "
     "(vllm-project/vllm PR #48110); other GPUs: assumption", "measured"),
    ("ATTENTION_FWD_EFFICIENCY", "fraction of peak", "cuDNN FA fwd H100 hd128 582 TFLOP/s "
     "(meta-pytorch/tritonbench #141); FA4 B200 0.63 (Dao-AILab/flash-attention PR #2280)",
     "measured"),
    ("ATTENTION_BWD_EFFICIENCY", "fraction of peak", "FA4 bwd B200 0.50-0.54 "
     "(Dao-AILab/flash-attention PR #2280); FA3 H100 lower (#1051)", "measured"),
    ("ATTENTION_BWD_FLOPS_FACTOR", "x forward", "5 vs 2 matmuls (flash-attention benchmark "
     "convention, FlashAttention-2 paper arXiv:2307.08691)", "measured"),
    ("FP8_CURRENT_SCALING_CAST_BYTES", "B/element", "TE Float8CurrentScaling (docs "
     "features/low_precision_training/fp8_current_scaling): amax pass + cast-transpose, "
     "counted", "assumption"),
    ("FP8_BLOCK_CAST_BYTES", "B/element", "TE Float8BlockScaling / DeepSeek-V3 report "
     "arXiv:2412.19437v1 section 3.3.2 (1x128, 128x128, FP32 scales), counted", "assumption"),
    ("FP8_BLOCK_WGRAD_FRACTION", "fraction of sustained", "median of DeepGEMM "
     "wgrad_gemm_fp8_fp8_fp32_nt on H800, DeepSeek-V3 shapes, 878-1092 TFLOPS "
     "(deepseek-ai/DeepGEMM PR #95, 2025-05)", "measured"),
    ("MXFP8_CAST_BYTES", "B/element", "OCP Microscaling spec v1.0 (32 elements per E8M0 "
     "scale), TE MXFP8BlockScaling, counted", "assumption"),
    ("DROPLESS_SYNC_S", "s", "D2H token-count sync per MoE layer fwd (Megatron-LM #1598, "
     "PR #2368; DeepEP #170); launch 4-6 us (pegainfer (3), susun-blog.com)", "assumption"),
    ("HOST_LAUNCH_LOW_S", "s/launch", "cudaLaunchKernel median CPU time, 197,809 calls "
     "(kekzl/imp PR #1367, Nsight Systems); host-launch band only", "measured"),
    ("HOST_LAUNCH_HIGH_S", "s/launch", "eager PyTorch 2.6 model, 53.7 ms host / 1185 launches "
     "(facebookresearch/sam2 issue #768); host-launch band only", "measured"),
    ("NVLINK_H100_ACHIEVABLE_FRACTION", "fraction", "370 of 450 GB/s busbw, non-all-reduce "
     "collectives (NVIDIA/nccl-tests issue #212)", "measured"),
    ("NVLINK_H800_ACHIEVABLE_FRACTION", "fraction", "160 of 200 GB/s (DeepSeek-V3 report "
     "arXiv:2412.19437v1 section 3.5; DeepEP normal kernels 153-158)", "measured"),
    ("NVLINK_BLACKWELL_ACHIEVABLE_FRACTION", "fraction", "738.48 of 900 GB/s: HybridEP "
     "intranode dispatch BF16, 8 ranks, 32 SMs, kernel only, GB200 (deepseek-ai/DeepEP PR "
     "#420, 2025-09-21); Torch API 615.78 / 519.57 (combine) not applied", "measured"),
    ("IB_ACHIEVABLE_FRACTION", "fraction", "48-49 of 50 GB/s, CX7 NDR all-to-all "
     "(NVIDIA/nccl-tests issue #267)", "measured"),
    ("ROCE_ACHIEVABLE_FRACTION", "fraction", "24 GB/s per 200G NIC (NVIDIA/nccl-tests issue "
     "#119), applied to RoCE", "assumption"),
    ("PCIE_ACHIEVABLE_FRACTION", "fraction", "52.8 of 64 GB/s Gen5 x16 D2H on H100 "
     "(NVIDIA/nvbandwidth issue #24)", "measured"),
    ("OPTIMIZER_STATE_BYTES_PER_PARAM", "B/param", "fp32 master + Adam m + v (Megatron-LM "
     "docs/source/api-guide/dist_optimizer.md, core_r0.9)", "measured"),
    ("GRAD_BYTES_PER_PARAM", "B/param", "fp32 main_grad (same document)", "measured"),
    ("OPTIMIZER_STEP_BYTES_PER_PARAM", "B/param", "HBM traffic of one Adam step: read 16, "
     "write 14 (counting from the same state layout)", "measured"),
    ("WORKSPACE_BYTES", "B", "engineering estimate: context + workspaces + NCCL buffers",
     "assumption"),
    ("HBM_RESERVE_FRACTION", "fraction", "fragmentation reserve of the memory plan",
     "assumption"),
    ("CP_EXPOSED_FRACTION", "fraction", "planner estimate only: half of CP K/V passes "
     "exposed", "assumption"),
    ("HOT_RATIO", "x mean", "attribution threshold (names stragglers, no step time)",
     "assumption"),
    ("UNCONGESTED_FACTOR", "x", "uncongested-core counterfactual of the attribution",
     "assumption"),
)


def _value(name: str) -> float:
    for module in _MODULES:
        if hasattr(module, name):
            return float(getattr(module, name))
    raise ConfigError("calibration", f"{name} is in the table but defined nowhere")


CONSTANTS: dict[str, CalibrationConstant] = {
    name: CalibrationConstant(name, _value(name), unit, source, kind)
    for name, unit, source, kind in _ROWS
}
"""Every calibration constant by name (value, unit, source with version, kind)."""
