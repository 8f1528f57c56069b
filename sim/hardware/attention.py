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
"""

from __future__ import annotations

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


def attention_flops(
    *,
    tokens: ArrayLike,
    seq_len: ArrayLike,
    n_heads: int,
    qk_head_dim: int,
    v_head_dim: int,
    causal: bool = True,
) -> TimeS:
    """Forward FLOPs of the attention core (see the module docstring)."""
    pairs = dim("attention.tokens", tokens) * dim("attention.seq_len", seq_len)
    per_pair = 2.0 * _heads(n_heads, qk_head_dim, v_head_dim)
    return shaped(pairs * per_pair / (2.0 if causal else 1.0))


def _heads(n_heads: int, qk_head_dim: int, v_head_dim: int) -> float:
    heads = dim("attention.n_heads", n_heads)
    dims = dim("attention.qk_head_dim", qk_head_dim) + dim("attention.v_head_dim", v_head_dim)
    return float(heads * dims)


def _time_s(
    gpu: GpuSpec, flops: FloatArray, moved: FloatArray, dtype: str, efficiency: float
) -> FloatArray:
    rate = gpu.peak_tflops(dtype) * TFLOPS * efficiency * sustained_fraction(gpu.name)
    compute = flops / rate
    memory = moved / (gpu.hbm_bw_bytes_per_s * HBM_ACHIEVABLE_FRACTION)
    return np.where(flops > 0, np.maximum(compute, memory) + KERNEL_LAUNCH_OVERHEAD_S, 0.0)


def attention_time_s(
    gpu: GpuSpec,
    *,
    tokens: ArrayLike,
    seq_len: ArrayLike,
    n_heads: int,
    qk_head_dim: int,
    v_head_dim: int,
    causal: bool = True,
    dtype: str = "bf16",
    slowdown: float = 1.0,
    backward: bool = False,
) -> TimeS:
    """Forward attention-core kernel time; 0 when there are no tokens. ``backward``: 2.5x the
    forward FLOPs at the lower backward efficiency, twice the bytes per token."""
    dtype, slow = check_dtype(dtype), check_slowdown(slowdown)
    flops = np.asarray(attention_flops(
        tokens=tokens, seq_len=seq_len, n_heads=n_heads, qk_head_dim=qk_head_dim,
        v_head_dim=v_head_dim, causal=causal,
    ))
    if backward:
        flops = ATTENTION_BWD_FLOPS_FACTOR * flops
    io = 4 if backward else 2  # per dim: Q, K, V read, O written; backward also dO, dQ, dK, dV
    per_token = n_heads * (io * qk_head_dim + io * v_head_dim) * input_bytes(dtype)
    moved = dim("attention.tokens", tokens) * per_token
    efficiency = ATTENTION_BWD_EFFICIENCY if backward else ATTENTION_FWD_EFFICIENCY
    return shaped(_time_s(gpu, flops, moved, dtype, efficiency) * slow)


attention_backward_time_s = partial(attention_time_s, backward=True)
""":func:`attention_time_s` with ``backward=True``."""
