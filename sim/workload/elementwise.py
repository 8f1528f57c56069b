"""Memory-bound kernels of one MoE layer that :mod:`moesim.workload.costs` does not charge.

Each kernel costs its HBM bytes (read + write) at the achievable bandwidth plus one launch
(:func:`moesim.hardware.memory_bound_time_s`). The full inventory of a Megatron-Core MoE layer's
elementwise work, per micro-batch, with ``m`` tokens on the rank, hidden ``h``, bf16 (2 B):

=========================  ==============================  ==================  =============
kernel                     bytes (elements x 2 B)          forward             backward
=========================  ==============================  ==================  =============
2 RMSNorms                 read x, write y: 2 m h each     costs.py (part)     costs.py
2 residual adds            read 2, write 1: 3 m h each     costs.py (part)     costs.py
rotary embedding on q, k   read + write q and k            **here**            **here**
router permute (gather)    read + write k m h              costs.py            **here**
unpermute (weighted sum)   read + write k m h              costs.py            **here**
SwiGLU activation          3 x tokens x ffn (fwd)          costs.py            costs.py
=========================  ==============================  ==================  =============

``costs.attention_block_s`` charges ``6 m h`` elements forward ("norms/residuals") and
``12 m h`` backward (RMSNorm backward reads x and dy and writes dx, 3 m h each; the residual
gradient adds where the branches merge, 3 m h each: 12 m h, all charged). The forward
inventory is 2 x 2 m h + 2 x 3 m h = 10 m h, so ``4 m h`` are added here
(:data:`NORM_RESIDUAL_FWD_MISSING`).

Rotary embedding (Megatron-Core ``apply_rotary_pos_emb``; Transformer Engine's fused RoPE
reads and writes each element of the rotated part once, forward and backward alike) acts on
the rotated dims of q (all query heads) and k (the KV heads; MLA: the one shared rope key),
on the TP group's gathered tokens with ``1/tp`` of the heads. The backward of the permute
(a gather of ``k`` copies per token) is the scatter-add of the copies' gradients, and the
backward of the unpermute (weighted sum of ``k`` copies) writes ``k`` gradient copies: each
moves the bytes of its forward. They are charged to ``attn_bwd`` (the permute's backward
belongs there; the unpermute's backward really runs just before the layer's ``combine_bwd``
all-to-all, one compute slot earlier).

Not charged anywhere (small or version-specific): the router's softmax / top-k / aux-loss
kernels on ``[m, experts]`` (launch-bound, a few microseconds each), the gate GEMM's backward.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from moesim.hardware import GpuSpec, memory_bound_time_s
from moesim.workload.shape import BF16_BYTES, LayerCosts, LayerShape

NORM_RESIDUAL_FWD_MISSING = 4.0
"""Elements per token x hidden not charged by costs.py forward: 10 m h inventory - 6 m h."""


def rope_bytes(shape: LayerShape) -> float:
    """HBM bytes of the rotary embedding on one rank's q and k (one direction).

    >>> from moesim.model import get_model
    >>> from moesim.workload.shape import LayerShape
    >>> rope_bytes(LayerShape(get_model("mixtral-8x7b"), 4096, 4096))  # 2 x m x (32+8) x 128 x 2
    83886080.0
    """
    model, tp = shape.model, shape.tp
    if model.attention == "mla":
        rotated = (model.num_attention_heads // tp + 1) * model.qk_rope_head_dim
    else:
        rotated = (model.num_attention_heads + model.num_key_value_heads) // tp * model.head_dim
    return 2.0 * shape.gathered_tokens * rotated * BF16_BYTES


def permute_bytes(shape: LayerShape) -> float:
    """HBM bytes of one permute (or unpermute): read + write the rank's ``k m`` token copies."""
    return 2.0 * shape.tokens_per_rank * shape.model.top_k * shape.hidden * BF16_BYTES


def extra_fwd_bytes(shape: LayerShape) -> tuple[float, ...]:
    """One entry per forward kernel added here: rotary, the norm/residual remainder."""
    norm_residual = NORM_RESIDUAL_FWD_MISSING * shape.tokens_per_rank * shape.hidden * BF16_BYTES
    return rope_bytes(shape), norm_residual


def extra_bwd_bytes(shape: LayerShape) -> tuple[float, ...]:
    """One entry per backward kernel added here: rotary, permute and unpermute backward."""
    return rope_bytes(shape), permute_bytes(shape), permute_bytes(shape)


def _time_s(gpu: GpuSpec, sizes: tuple[float, ...], slowdown: np.ndarray) -> np.ndarray:
    per_kernel = sum(float(memory_bound_time_s(gpu, size)) for size in sizes)
    return per_kernel * np.asarray(slowdown, dtype=float)


def with_elementwise(
    costs: LayerCosts, shape: LayerShape, gpu: GpuSpec, slowdown: np.ndarray
) -> LayerCosts:
    """``costs`` with the kernels above added: forward ones to ``attn_fwd``, backward ones to
    ``attn_bwd``, per rank (times ``slowdown``, the per-rank kernel factor)."""
    return replace(
        costs,
        attn_fwd=costs.attn_fwd + _time_s(gpu, extra_fwd_bytes(shape), slowdown),
        attn_bwd=costs.attn_bwd + _time_s(gpu, extra_bwd_bytes(shape), slowdown),
    )
