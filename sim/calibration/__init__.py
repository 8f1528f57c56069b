"""Calibration constants: the one place where measured or assumed efficiencies and factors live.

Every number the compute, network, memory and attribution models use beyond a datasheet line
rate is a module-level constant of this package, listed in :data:`CONSTANTS` with its value,
unit, source (with the issue, PR, document revision or paper version it comes from) and kind
(``measured`` or ``assumption``). Datasheet numbers of the GPUs live in
:mod:`moesim.hardware.gpus`; link line rates and latencies in ``moesim.topologies.constants``.

- :mod:`moesim.calibration.kernels`: GEMM efficiency curve, sustained clocks, attention,
  launch overhead, HBM, the overlapped dispatcher's SMs, the host-launch band's two ends,
  DeepEP's forwarding-node size, low-latency message header and normal-kernel token slot;
- :mod:`moesim.calibration.links`: achievable fraction of line rate per link class;
- :mod:`moesim.calibration.training`: optimizer/gradient bytes, workspace, HBM reserve, the
  planner's DP/CP exposure, the attribution's thresholds;
- :mod:`moesim.calibration.table`: the registry.

A constant is never chosen, or switched between sources, because a validation case then
passes; the commit that changes one lists every validation case whose error moved.
"""

from __future__ import annotations

from moesim.calibration.kernels import (
    ATTENTION_BWD_EFFICIENCY,
    ATTENTION_BWD_FLOPS_FACTOR,
    ATTENTION_FWD_EFFICIENCY,
    DEEPEP_NVL_PEERS,
    DEEPEP_SOURCE_META_BYTES,
    DEEPEP_TOKEN_ALIGN_BYTES,
    DROPLESS_SYNC_S,
    FP8_BLOCK_CAST_BYTES,
    FP8_BLOCK_WGRAD_FRACTION,
    FP8_CURRENT_SCALING_CAST_BYTES,
    GEMM_MIN_ROWS,
    GEMM_SPLIT_K_MIN,
    GEMM_TILE_M,
    GEMM_TILE_N,
    HBM_ACHIEVABLE_FRACTION,
    HOST_LAUNCH_HIGH_S,
    HOST_LAUNCH_LOW_S,
    KERNEL_LAUNCH_OVERHEAD_S,
    LL_MESSAGE_HEADER_BYTES,
    MXFP8_CAST_BYTES,
    OVERLAP_DISPATCHER_SMS,
    SUSTAINED_FRACTION_BLACKWELL,
    SUSTAINED_FRACTION_BY_GPU,
    SUSTAINED_FRACTION_HOPPER,
    sustained_fraction,
)
from moesim.calibration.links import (
    IB_ACHIEVABLE_FRACTION,
    LINK_TIERS,
    NVLINK_ACHIEVABLE_FRACTION_BY_GPU,
    NVLINK_BLACKWELL_ACHIEVABLE_FRACTION,
    NVLINK_H100_ACHIEVABLE_FRACTION,
    NVLINK_H800_ACHIEVABLE_FRACTION,
    PCIE_ACHIEVABLE_FRACTION,
    ROCE_ACHIEVABLE_FRACTION,
    SCALE_OUT_ACHIEVABLE_FRACTION,
    SCALE_OUT_TIERS,
    link_achievable_fraction,
)
from moesim.calibration.table import CONSTANTS, KINDS, CalibrationConstant
from moesim.calibration.training import (
    CP_EXPOSED_FRACTION,
    GRAD_BYTES_PER_PARAM,
    HBM_RESERVE_FRACTION,
    HOT_RATIO,
    OPTIMIZER_STATE_BYTES_PER_PARAM,
    OPTIMIZER_STEP_BYTES_PER_PARAM,
    UNCONGESTED_FACTOR,
    WORKSPACE_BYTES,
)

__all__ = [
    "ATTENTION_BWD_EFFICIENCY",
    "ATTENTION_BWD_FLOPS_FACTOR",
    "ATTENTION_FWD_EFFICIENCY",
    "CONSTANTS",
    "CP_EXPOSED_FRACTION",
    "DEEPEP_NVL_PEERS",
    "DEEPEP_SOURCE_META_BYTES",
    "DEEPEP_TOKEN_ALIGN_BYTES",
    "DROPLESS_SYNC_S",
    "FP8_BLOCK_CAST_BYTES",
    "FP8_BLOCK_WGRAD_FRACTION",
    "FP8_CURRENT_SCALING_CAST_BYTES",
    "GEMM_MIN_ROWS",
    "GEMM_SPLIT_K_MIN",
    "GEMM_TILE_M",
    "GEMM_TILE_N",
    "GRAD_BYTES_PER_PARAM",
    "HBM_ACHIEVABLE_FRACTION",
    "HBM_RESERVE_FRACTION",
    "HOST_LAUNCH_HIGH_S",
    "HOST_LAUNCH_LOW_S",
    "HOT_RATIO",
    "IB_ACHIEVABLE_FRACTION",
    "KERNEL_LAUNCH_OVERHEAD_S",
    "KINDS",
    "LINK_TIERS",
    "LL_MESSAGE_HEADER_BYTES",
    "MXFP8_CAST_BYTES",
    "NVLINK_ACHIEVABLE_FRACTION_BY_GPU",
    "NVLINK_BLACKWELL_ACHIEVABLE_FRACTION",
    "NVLINK_H100_ACHIEVABLE_FRACTION",
    "NVLINK_H800_ACHIEVABLE_FRACTION",
    "OPTIMIZER_STATE_BYTES_PER_PARAM",
    "OPTIMIZER_STEP_BYTES_PER_PARAM",
    "OVERLAP_DISPATCHER_SMS",
    "PCIE_ACHIEVABLE_FRACTION",
    "ROCE_ACHIEVABLE_FRACTION",
    "SCALE_OUT_ACHIEVABLE_FRACTION",
    "SCALE_OUT_TIERS",
    "SUSTAINED_FRACTION_BLACKWELL",
    "SUSTAINED_FRACTION_BY_GPU",
    "SUSTAINED_FRACTION_HOPPER",
    "UNCONGESTED_FACTOR",
    "WORKSPACE_BYTES",
    "CalibrationConstant",
    "link_achievable_fraction",
    "sustained_fraction",
]
