"""Hardware: GPU presets and the roofline compute-time model.

>>> from moesim.hardware import GemmShape, get_gpu, gemm_time_s
>>> t = gemm_time_s(get_gpu("H100"), GemmShape(8192, 8192, 8192))
>>> round(t * 1e3, 3)  # ms, at the sustained 673.7 TFLOP/s plus one launch
1.635
"""

from __future__ import annotations

from moesim.hardware.attention import (
    AttentionShape,
    attention_backward_time_s,
    attention_flops,
    attention_time_s,
)
from moesim.hardware.dtypes import DTYPES, OUTPUT_BYTES, check_dtype, input_bytes
from moesim.hardware.gpus import B200, GB200, GPUS, H100, H200, H800, GpuSpec, get_gpu, register_gpu
from moesim.hardware.precision import (
    PRECISIONS,
    Precision,
    cast_time_s,
    check_precision_gpu,
    get_precision,
)
from moesim.hardware.roofline import (
    GemmShape,
    check_slowdown,
    gemm_backward_time_s,
    gemm_efficiency,
    gemm_flops,
    gemm_time_s,
    grouped_gemm_backward_time_s,
    grouped_gemm_time_s,
    memory_bound_time_s,
)

__all__ = [
    "B200",
    "DTYPES",
    "GB200",
    "GPUS",
    "H100",
    "H200",
    "H800",
    "OUTPUT_BYTES",
    "PRECISIONS",
    "AttentionShape",
    "GemmShape",
    "GpuSpec",
    "Precision",
    "attention_backward_time_s",
    "attention_flops",
    "attention_time_s",
    "cast_time_s",
    "check_dtype",
    "check_precision_gpu",
    "check_slowdown",
    "gemm_backward_time_s",
    "gemm_efficiency",
    "gemm_flops",
    "gemm_time_s",
    "get_gpu",
    "get_precision",
    "grouped_gemm_backward_time_s",
    "grouped_gemm_time_s",
    "input_bytes",
    "memory_bound_time_s",
    "register_gpu",
]
