"""Attention core (softmax(Q K^T) V) time, flash-attention style: one fused kernel.

FLOPs of the forward, for ``tokens`` query tokens each attending to ``seq_len`` keys::

    flops = 2 x tokens x seq_len x n_heads x (qk_head_dim + v_head_dim) / (2 if causal)

(Q K^T costs 2 x qk_head_dim and P V 2 x v_head_dim per query-key pair per head; a causal
mask skips half the pairs.) The backward costs ``ATTENTION_BWD_FLOPS_FACTOR`` (2.5) times
that. Throughput is a constant fraction of the dense datasheet peak
(``ATTENTION_FWD_EFFICIENCY`` / ``ATTENTION_BWD_EFFICIENCY``, sources in
:mod:`moesim.calibration`), lower than a GEMM's: softmax, masking and the online rescaling
keep the tensor cores idle part of the time. Those figures are short benchmark runs: like a
GEMM's, the throughput is scaled by :func:`moesim.calibration.sustained_fraction` to the clock
the power limit holds through a training step. It does not vary with sequence length, which
is optimistic for short sequences (below ~2k tokens).

HBM traffic: each token's Q, K, V are read and O written once in the forward (K/V per
query token, i.e. MHA sizing); the backward reads Q, K, V, O, dO and writes dQ, dK, dV.
Attention is compute-bound at training sequence lengths; the bytes only matter for tiny
shapes. MLA fits the same call with its head dims (qk 192 = 128 nope + 64 rope, v 128).

The functions take the attention as an :class:`AttentionShape` (checked once when made) and the
GPU's ``slowdown`` apart, as :mod:`moesim.hardware.roofline` takes a GEMM.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial

import numpy as np
from numpy.typing import ArrayLike

from moesim.calibration import (
    ATTENTION_BWD_EFFICIENCY,
    ATTENTION_BWD_FLOPS_FACTOR,
    ATTENTION_FWD_EFFICIENCY,
    HBM_ACHIEVABLE_FRACTION,
    KERNEL_LAUNCH_OVERHEAD_S,
    sustained_fraction,
)
from moesim.hardware._arrays import FloatArray, TimeS, check_slowdown, dim, shaped
from moesim.hardware.dtypes import check_dtype, input_bytes
from moesim.hardware.gpus import TFLOPS, GpuSpec


@dataclass(frozen=True, eq=False, init=False)
class AttentionShape:
    """The attention core's work: ``tokens`` query tokens each attending to ``seq_len`` keys
    (both broadcast: arrays price many at once) over ``n_heads`` heads of ``qk_head_dim`` /
    ``v_head_dim``, causal or not, in ``dtype``. Each size must be finite and >= 0
    (``attention.tokens`` ... name it)."""

    tokens: FloatArray
    seq_len: FloatArray
    n_heads: FloatArray
    qk_head_dim: FloatArray
    v_head_dim: FloatArray
    causal: bool
    dtype: str

    def __init__(self, *, tokens: ArrayLike, seq_len: ArrayLike, n_heads: int, qk_head_dim: int,
                 v_head_dim: int, causal: bool = True, dtype: str = "bf16") -> None:
        sizes = {"tokens": tokens, "seq_len": seq_len, "n_heads": n_heads,
                 "qk_head_dim": qk_head_dim, "v_head_dim": v_head_dim}
        for name, value in sizes.items():
            object.__setattr__(self, name, dim(f"attention.{name}", value))
        object.__setattr__(self, "causal", bool(causal))
        object.__setattr__(self, "dtype", check_dtype(dtype))


def attention_flops(shape: AttentionShape) -> TimeS:
    """Forward FLOPs of the attention core (see the module docstring)."""
    pairs = shape.tokens * shape.seq_len
    per_pair = 2.0 * float(shape.n_heads * (shape.qk_head_dim + shape.v_head_dim))
    return shaped(pairs * per_pair / (2.0 if shape.causal else 1.0))


def _time_s(
    gpu: GpuSpec, flops: FloatArray, moved: FloatArray, dtype: str, efficiency: float
) -> FloatArray:
    rate = gpu.peak_tflops(dtype) * TFLOPS * efficiency * sustained_fraction(gpu.name)
    compute = flops / rate
    memory = moved / (gpu.hbm_bw_bytes_per_s * HBM_ACHIEVABLE_FRACTION)
    return np.where(flops > 0, np.maximum(compute, memory) + KERNEL_LAUNCH_OVERHEAD_S, 0.0)


def attention_time_s(
    gpu: GpuSpec, shape: AttentionShape, slowdown: float = 1.0, *, backward: bool = False
) -> TimeS:
    """Forward attention-core kernel time; 0 when there are no tokens. ``backward``: 2.5x the
    forward FLOPs at the lower backward efficiency, twice the bytes per token."""
    slow = check_slowdown(slowdown)
    flops = np.asarray(attention_flops(shape))
    if backward:
        flops = ATTENTION_BWD_FLOPS_FACTOR * flops
    io = 4 if backward else 2  # per dim: Q, K, V read, O written; backward also dO, dQ, dK, dV
    per_token = shape.n_heads * (io * shape.qk_head_dim + io * shape.v_head_dim) \
        * input_bytes(shape.dtype)
    efficiency = ATTENTION_BWD_EFFICIENCY if backward else ATTENTION_FWD_EFFICIENCY
    return shaped(_time_s(gpu, flops, shape.tokens * per_token, shape.dtype, efficiency) * slow)


attention_backward_time_s = partial(attention_time_s, backward=True)
""":func:`attention_time_s` with ``backward=True``."""
