"""Training precisions as users name them: the GEMM rate each runs at and what its casts cost.

=============  ==========  =================================================  ==============
name           GEMM rate   quantisation of each GEMM input (activations,       Blackwell only
                           gradients; weights once per step)
=============  ==========  =================================================  ==============
``bf16``       BF16        none                                               no
``fp8``        FP8         not modelled (an idealised FP8: scenarios written  no
                           before the recipes below were known)
``fp8-cs``     FP8         per-tensor current scaling: amax pass +            no
                           cast-transpose, 6 B/element, 2 kernels
``fp8-block``  FP8         1x128 / 128x128 blocks, FP32 scales (DeepSeek-V3):  no
                           one pass, 4.06 B/element
``mxfp8``      FP8         1x32 blocks, E8M0 scales: one pass, 4.06 B/element yes
=============  ==========  =================================================  ==============

Bytes per element are :mod:`moesim.calibration` constants (with their sources). Every FP8
recipe runs its GEMMs at the measured FP8 matmul rate of the GPU (MAMF, ``gpus.py``); no
per-recipe GEMM rate is published for the same shapes, so the recipes differ here only in
their casts (assumption). Which tensors are quantised follows Transformer Engine's ``Linear``:
forward, the GEMM's input ``X[m, k]`` (row-wise and column-wise copies, the latter kept for the
wgrad GEMM); backward, the output gradient ``dY[m, n]`` (both copies); the weights once per
step (TE caches the FP8 weights over the micro-batches of a step). Attention cores, the router
gate and the LM head stay BF16 (DeepSeek-V3 report section 3.3.1; TE's recipes leave them
out), so they are not quantised.
"""

from __future__ import annotations

from dataclasses import dataclass

from moesim.calibration import (
    FP8_BLOCK_CAST_BYTES,
    FP8_CURRENT_SCALING_CAST_BYTES,
    MXFP8_CAST_BYTES,
)
from moesim.errors import ConfigError
from moesim.hardware._arrays import TimeS
from moesim.hardware.gpus import GpuSpec
from moesim.hardware.roofline import memory_bound_time_s

BLACKWELL = ("B200", "GB200")
"""GPU presets with tensor cores that read MX block scales natively (sm_100)."""


@dataclass(frozen=True)
class Precision:
    """One training precision: ``gemm_dtype`` sets the GEMM rate; each quantised element
    costs ``cast_bytes`` of HBM traffic spread over ``cast_kernels`` kernels."""

    name: str
    gemm_dtype: str
    cast_bytes: tuple[float, ...] = ()
    blackwell_only: bool = False

    @property
    def cast_kernels(self) -> int:
        return len(self.cast_bytes)


PRECISIONS: dict[str, Precision] = {
    p.name: p
    for p in (
        Precision("bf16", "bf16"),
        Precision("fp8", "fp8"),
        # amax pass reads 2 B; cast-transpose reads 2 B and writes 2 x 1 B
        Precision("fp8-cs", "fp8", (2.0, FP8_CURRENT_SCALING_CAST_BYTES - 2.0)),
        Precision("fp8-block", "fp8", (FP8_BLOCK_CAST_BYTES,)),
        Precision("mxfp8", "fp8", (MXFP8_CAST_BYTES,), blackwell_only=True),
    )
}
"""Every precision by the name a user writes (``workload.compute_dtype``)."""


def get_precision(name: str, field: str = "compute_dtype") -> Precision:
    """The precision called ``name``, or ConfigError naming the allowed ones."""
    if not isinstance(name, str) or name not in PRECISIONS:
        raise ConfigError(field, f"unknown {name!r}; allowed: {', '.join(PRECISIONS)}")
    return PRECISIONS[name]


def check_precision_gpu(name: str, gpu: GpuSpec, field: str = "compute_dtype") -> None:
    """ConfigError when precision ``name`` needs tensor cores ``gpu`` lacks: any FP8 recipe
    on a GPU without FP8 tensor cores (Ampere: A100, A800), MXFP8 off Blackwell."""
    precision = get_precision(name, field)
    if precision.gemm_dtype == "fp8" and not gpu.has_fp8:
        raise ConfigError(field, f"{name} needs FP8 tensor cores (Hopper or Blackwell); "
                                 f"{gpu.name} has none: use bf16")
    if precision.blackwell_only and gpu.name not in BLACKWELL:
        raise ConfigError(field, f"{name} needs Blackwell tensor cores ({', '.join(BLACKWELL)})"
                                 f"; {gpu.name} has none: use fp8-cs or fp8-block")


def cast_time_s(gpu: GpuSpec, elements: float, precision: str, slowdown: float = 1.0) -> TimeS:
    """Time of quantising ``elements`` BF16 values to ``precision``'s FP8 format (both
    copies): each of its kernels moves its bytes per element at the achievable HBM rate,
    plus one launch. 0 for BF16, for ``fp8`` (casts not modelled) and for no elements.

    >>> from moesim.hardware.gpus import B200
    >>> round(float(cast_time_s(B200, 2**24, "mxfp8")) * 1e6, 1)  # 68 MB at 6.72 TB/s + 3 us
    13.1
    """
    p = get_precision(precision)
    if elements <= 0:
        return 0.0
    return sum(float(memory_bound_time_s(gpu, elements * b, slowdown)) for b in p.cast_bytes)
