"""Roofline compute model: how long a GEMM, a grouped GEMM or an elementwise kernel takes.

One kernel costs::

    time = (max(flops / (peak x efficiency), bytes / (hbm_bw x HBM_ACHIEVABLE_FRACTION))
            + KERNEL_LAUNCH_OVERHEAD_S) x slowdown

and nothing at all when it has no work (m, n or k is 0, or a rank received no tokens): no
kernel is launched, so no overhead is charged.

The GEMM efficiency curve (constants in :mod:`moesim.calibration`)::

    efficiency(m, n, k) = (MAMF / peak) x sustained x row_use(m) x sm_fill(m, n, k)
    row_use(m)          = min(1, m / GEMM_MIN_ROWS)
    sm_fill             = min(1, max(P, U) / (U x sm_count))
    P = 2 x max(m, GEMM_MIN_ROWS) x n x k      (FLOPs the tensor cores actually run)
    U = 2 x GEMM_TILE_M x GEMM_TILE_N x GEMM_SPLIT_K_MIN   (smallest work unit of one SM)

* Large shapes saturate at MAMF x sustained / peak: MAMF is the best measured large-GEMM
  throughput of a short burst; ``sustained`` (:func:`moesim.calibration.sustained_fraction`,
  0.848 on Hopper) is what remains of it at the clock the board's power limit holds through
  a training step (the measured MSMF / MAMF).
* Few rows (few tokens): the MMA instruction still computes 64 rows, so ``row_use`` falls
  and the kernel soon becomes HBM-bound on reading the weights.
* Small total work: split-K / stream-K decompositions spread a GEMM over the SMs down to
  one work unit per SM; below that, SMs idle (``sm_fill`` < 1). Wave quantisation beyond
  the first wave is taken as smoothed by stream-K, and tile padding above 64 rows as
  absorbed by tile-size choice: both are optimistic, and both keep efficiency
  non-decreasing and time non-decreasing in every dimension (more tokens never finish
  sooner), which the straggler attribution relies on.

Backward of ``Y[m,n] = X[m,k] @ W[k,n]`` is two GEMMs of the same FLOPs each, dgrad
``dX = dY @ W^T`` (m, k, n) and wgrad ``dW = X^T @ dY`` (k, n, m):
:func:`gemm_backward_time_s` and :func:`grouped_gemm_backward_time_s` cost them, so
callers need not double anything.

Weight gradients accumulate. Megatron-Core's ``gradient_accumulation_fusion`` (on in Megatron-LM
by default and set by Megatron-Bridge's recipes) has Transformer Engine run each wgrad GEMM with
``fuse_wgrad_accumulation``: beta = 1 into the parameter's ``main_grad`` buffer (fp32 unless
gradients are reduced in BF16), so the wgrad kernel reads and writes every weight-gradient
element there (2 x 4 B) instead of writing a fresh BF16 output (2 B).
``GemmShape.wgrad_out_bytes`` carries what the caller's step does; memory-bound wgrads (experts
with few tokens: about m < 4 x the GPU's FLOP/byte ridge) pay for it.

Every function takes the GEMM as a :class:`GemmShape` (m, n, k and the input dtype, checked
once when it is made) and the GPU's ``slowdown`` apart: what the kernel computes, then where.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial

import numpy as np
from numpy.typing import ArrayLike

from moesim.calibration import kernels
from moesim.errors import ConfigError
from moesim.hardware._arrays import FloatArray, TimeS, check_slowdown, dim, shaped
from moesim.hardware.dtypes import OUTPUT_BYTES, check_dtype, input_bytes
from moesim.hardware.gpus import TFLOPS, GpuSpec

#: FLOPs of the smallest work unit one SM takes (tile x minimal K slice).
UNIT_FLOPS = 2.0 * kernels.GEMM_TILE_M * kernels.GEMM_TILE_N * kernels.GEMM_SPLIT_K_MIN


@dataclass(frozen=True, eq=False, init=False)
class GemmShape:
    """One GEMM's work, ``Y[m,n] = X[m,k] @ W[k,n]`` with X and W in ``dtype``.

    ``m``, ``n``, ``k`` broadcast (arrays price many GEMMs at once). A grouped GEMM (one launch
    over a rank's local experts, each ``[m_e, k] @ [k, n]``) has each expert's tokens along the
    last axis of ``m``. Each dimension must be finite and >= 0 (``gemm.m`` ... name it).
    ``wgrad_out_bytes``: HBM bytes the backward's wgrad kernel moves per weight-gradient element
    at its output (2: it writes BF16; 8: it accumulates into an fp32 ``main_grad``, read +
    write; see the module docstring). ``wgrad_rate``: the fraction of the sustained GEMM rate
    the backward's wgrad kernel reaches (1: as any GEMM; FP8 blockwise wgrads less,
    :data:`moesim.calibration.FP8_BLOCK_WGRAD_FRACTION`).
    """

    m: FloatArray
    n: FloatArray
    k: FloatArray
    dtype: str
    wgrad_out_bytes: float
    wgrad_rate: float

    def __init__(self, m: ArrayLike, n: ArrayLike, k: ArrayLike, dtype: str = "bf16",
                 wgrad_out_bytes: float = OUTPUT_BYTES, wgrad_rate: float = 1.0) -> None:
        object.__setattr__(self, "m", dim("gemm.m", m))
        object.__setattr__(self, "n", dim("gemm.n", n))
        object.__setattr__(self, "k", dim("gemm.k", k))
        object.__setattr__(self, "dtype", check_dtype(dtype))
        object.__setattr__(self, "wgrad_out_bytes", float(dim("gemm.wgrad_out_bytes",
                                                              wgrad_out_bytes)))
        if not 0.0 < wgrad_rate <= 1.0:
            raise ConfigError("gemm.wgrad_rate", f"must be in (0, 1], got {wgrad_rate}")
        object.__setattr__(self, "wgrad_rate", float(wgrad_rate))


# ---- the pieces of one kernel ----------------------------------------------------------


def _padded_rows(m: FloatArray) -> FloatArray:
    return np.where(m > 0, np.maximum(m, kernels.GEMM_MIN_ROWS), 0.0)


def _gemm_terms(
    m: FloatArray, n: FloatArray, k: FloatArray, dtype: str, out_bytes: float = OUTPUT_BYTES
) -> tuple[FloatArray, FloatArray, FloatArray]:
    """(useful FLOPs, FLOPs run incl. row padding, HBM bytes) of Y[m,n] = X[m,k] @ W[k,n],
    moving ``out_bytes`` per element of Y."""
    flops = 2.0 * m * n * k
    padded = 2.0 * _padded_rows(m) * n * k
    moved = (m * k + k * n) * input_bytes(dtype) + m * n * out_bytes
    return flops, padded, np.where(flops > 0, moved, 0.0)


def _sm_fill(gpu: GpuSpec, padded_flops: FloatArray) -> FloatArray:
    return np.minimum(1.0, np.maximum(padded_flops, UNIT_FLOPS) / (UNIT_FLOPS * gpu.sm_count))


def _compute_s(gpu: GpuSpec, padded_flops: FloatArray, dtype: str) -> FloatArray:
    """max(P, min(P, U) x sm) / MAMF: = P / (MAMF x sm_fill), written to stay monotone."""
    busy = np.maximum(padded_flops, np.minimum(padded_flops, UNIT_FLOPS) * gpu.sm_count)
    return busy / (sustained_tflops(gpu, dtype) * TFLOPS)


def hbm_time_s(gpu: GpuSpec, bytes_moved: FloatArray) -> FloatArray:
    """Seconds to move ``bytes_moved`` through HBM at its achievable rate (no launch)."""
    return bytes_moved / (gpu.hbm_bw_bytes_per_s * kernels.HBM_ACHIEVABLE_FRACTION)


def _kernel_s(
    gpu: GpuSpec, flops: FloatArray, padded: FloatArray, moved: FloatArray, dtype: str,
    rate: float = 1.0,
) -> FloatArray:
    """One kernel (module docstring); ``rate``: the fraction of the sustained GEMM rate it
    reaches (a wgrad's ``GemmShape.wgrad_rate``)."""
    run = np.maximum(_compute_s(gpu, padded, dtype) / rate, hbm_time_s(gpu, moved))
    return np.where(flops > 0, run + kernels.KERNEL_LAUNCH_OVERHEAD_S, 0.0)


# ---- public API ------------------------------------------------------------------------


def sustained_tflops(gpu: GpuSpec, dtype: str = "bf16") -> float:
    """The GEMM ceiling through a training step: MAMF x the sustained fraction of ``gpu``.

    >>> from moesim.hardware.gpus import H100
    >>> round(sustained_tflops(H100), 1)
    673.7
    """
    return gpu.mamf_tflops(dtype) * kernels.sustained_fraction(gpu.name)



def gemm_flops(shape: GemmShape) -> TimeS:
    """2 m n k: the FLOPs of one GEMM (forward)."""
    return shaped(2.0 * shape.m * shape.n * shape.k)


def gemm_efficiency(gpu: GpuSpec, shape: GemmShape) -> TimeS:
    """Achieved / peak FLOP rate of the GEMM's compute phase (see the module docstring)."""
    row_use = np.minimum(1.0, shape.m / kernels.GEMM_MIN_ROWS)
    padded = 2.0 * _padded_rows(shape.m) * shape.n * shape.k
    peak = gpu.peak_tflops(shape.dtype)
    eff = sustained_tflops(gpu, shape.dtype) / peak * row_use * _sm_fill(gpu, padded)
    return shaped(np.where(padded > 0, eff, 0.0))


def gemm_time_s(
    gpu: GpuSpec, shape: GemmShape, slowdown: float = 1.0, *, backward: bool = False
) -> TimeS:
    """Time of one GEMM kernel; 0 when it has no work. ``backward``: its dgrad (m, k, n) +
    wgrad (k, n, m) kernels, 2x its FLOPs.

    Vectorised: m, n, k broadcast; returns a float for scalar dimensions.
    """
    slow = check_slowdown(slowdown)
    m, n, k, dtype = shape.m, shape.n, shape.k, shape.dtype
    if not backward:
        return shaped(_kernel_s(gpu, *_gemm_terms(m, n, k, dtype), dtype) * slow)
    dgrad = _kernel_s(gpu, *_gemm_terms(m, k, n, dtype), dtype)
    wgrad = _kernel_s(gpu, *_gemm_terms(k, n, m, dtype, shape.wgrad_out_bytes), dtype,
                      shape.wgrad_rate)
    return shaped((dgrad + wgrad) * slow)


gemm_backward_time_s = partial(gemm_time_s, backward=True)
"""dgrad + wgrad of the GEMM (m, n, k): :func:`gemm_time_s` with ``backward=True``."""


def gemm_wgrad_time_s(gpu: GpuSpec, shape: GemmShape, slowdown: float = 1.0) -> TimeS:
    """The wgrad kernel alone (``dW[k,n] = X^T @ dY``) of :func:`gemm_time_s`'s backward: the
    weight-gradient part a zero-bubble schedule defers (DualPipe's W)."""
    slow = check_slowdown(slowdown)
    m, n, k, dtype = shape.m, shape.n, shape.k, shape.dtype
    return shaped(_kernel_s(gpu, *_gemm_terms(k, n, m, dtype, shape.wgrad_out_bytes), dtype,
                            shape.wgrad_rate)
                  * slow)


def grouped_gemm_time_s(
    gpu: GpuSpec, shape: GemmShape, slowdown: float = 1.0, *, backward: bool = False
) -> float:
    """One grouped-GEMM kernel over a rank's local experts: expert e computes
    ``[m_e, k] @ [k, n]`` with m_e = ``shape.m[e]`` (1-D: one token count per local expert).
    ``backward``: grouped dgrad ``[m_e, n] @ [n, k]`` plus grouped wgrad ``[k, m_e] @ [m_e, n]``,
    two kernels, 2x the FLOPs.

    All experts' tiles share the SMs (one launch), so time follows the rank's total work:
    a rank that received 4x the tokens takes ~4x as long once compute-bound. An expert
    with no tokens costs nothing (its weights are not read). Each expert pays at least the
    MMA's 64 rows (``GEMM_MIN_ROWS``). Not modelled: whole row blocks per expert (DeepGEMM's
    contiguous layout aligns each expert to its block M, 128; TE's per-expert cuBLAS GEMMs
    pick their own tile), so an expert just above a block edge is optimistic here.
    """
    slow = check_slowdown(slowdown)
    if shape.m.ndim != 1:
        raise ConfigError("gemm.m", f"a grouped GEMM's tokens per expert must be 1-D (one "
                          f"count per local expert), got shape {shape.m.shape}")
    one_row = shape.m[np.newaxis, :]  # one rank: the one-row case
    return float(_grouped_s(gpu, shape, one_row, np.full(1, slow), backward)[0])


grouped_gemm_backward_time_s = partial(grouped_gemm_time_s, backward=True)
""":func:`grouped_gemm_time_s` with ``backward=True``."""


def grouped_gemm_rows_time_s(
    gpu: GpuSpec, shape: GemmShape, slowdown: ArrayLike = 1.0, *, backward: bool = False
) -> FloatArray:
    """The grouped-GEMM kernel of each row of ``shape.m`` [ranks, local experts] (one rank's
    local experts a row, at that rank's ``slowdown``), in one vectorised pass;
    :func:`grouped_gemm_time_s` is its one-row case."""
    m = shape.m
    if m.ndim != 2:
        raise ConfigError("gemm.m", f"grouped GEMM rows must be 2-D (ranks x local experts), "
                          f"got shape {m.shape}")
    slow = np.broadcast_to(np.asarray(slowdown, dtype=np.float64), m.shape[:1])
    bad = ~(slow >= 1.0) | ~np.isfinite(slow)  # one pass; the message names the first bad value
    if bad.any():
        check_slowdown(float(np.unique(slow[bad])[0]))

    return _grouped_s(gpu, shape, m, slow, backward)


def grouped_gemm_rows_wgrad_time_s(gpu: GpuSpec, shape: GemmShape,
                                   slowdown: ArrayLike = 1.0) -> FloatArray:
    """The grouped wgrad kernel alone of each row of :func:`grouped_gemm_rows_time_s`'s
    backward (``[k, m_e] @ [m_e, n]`` per local expert, one launch per row)."""
    if shape.m.ndim != 2:
        raise ConfigError("gemm.m", f"grouped GEMM rows must be 2-D (ranks x local experts), "
                          f"got shape {shape.m.shape}")
    slow = np.broadcast_to(np.asarray(slowdown, dtype=np.float64), shape.m.shape[:1])
    flops, padded, moved = (t.sum(axis=1) for t in _gemm_terms(
        shape.k, shape.n, shape.m, shape.dtype, shape.wgrad_out_bytes))
    return _kernel_s(gpu, flops, padded, moved, shape.dtype, shape.wgrad_rate) * slow


def _grouped_s(gpu: GpuSpec, shape: GemmShape, m: FloatArray, slow: FloatArray,
               backward: bool) -> FloatArray:
    """The grouped-GEMM kernel of each row of ``m`` (``shape``'s n, k and dtype) at ``slow``."""
    n, k, dtype = shape.n, shape.k, shape.dtype

    def kernel(terms: tuple[FloatArray, FloatArray, FloatArray], rate: float = 1.0
               ) -> FloatArray:
        flops, padded, moved = (t.sum(axis=1) for t in terms)
        return _kernel_s(gpu, flops, padded, moved, dtype, rate) * slow

    if not backward:
        return kernel(_gemm_terms(m, n, k, dtype))
    return (kernel(_gemm_terms(m, k, n, dtype))
            + kernel(_gemm_terms(k, n, m, dtype, shape.wgrad_out_bytes), shape.wgrad_rate))


def memory_bound_time_s(gpu: GpuSpec, bytes_moved: ArrayLike, slowdown: float = 1.0) -> TimeS:
    """An elementwise kernel (permute, norm, activation) that reads+writes ``bytes_moved``
    bytes of HBM in total; 0 when it moves nothing."""
    slow = check_slowdown(slowdown)
    moved = dim("bytes_moved", bytes_moved)
    t = np.where(moved > 0, hbm_time_s(gpu, moved) + kernels.KERNEL_LAUNCH_OVERHEAD_S, 0.0)
    return shaped(t * slow)
