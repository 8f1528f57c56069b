"""Compute time of each op of one MoE layer on each EP rank (roofline).

The costs follow the routing: a rank's grouped expert GEMM costs what the
tokens its local experts actually received cost, so router skew turns into a
straggler here. Backward GEMMs cost dgrad + wgrad (twice the forward FLOPs).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from sim.hardware import (
    GpuSpec,
    attention_backward_time_s,
    attention_time_s,
    gemm_backward_time_s,
    gemm_time_s,
    grouped_gemm_backward_time_s,
    grouped_gemm_time_s,
    memory_bound_time_s,
)
from sim.model import ModelConfig
from sim.model.accounting import attention_matmul_params
from sim.router import RoutingResult

BF16_BYTES = 2
FP8_SCALE_GROUP = 128  # DeepEP FP8 dispatch: one fp32 scale per 128 elements
WIRE_DTYPES = ("fp8", "bf16")


def token_bytes(hidden: int, dtype: str) -> float:
    """Bytes one token's hidden state takes on the wire in ``dtype``."""
    if dtype == "fp8":
        return hidden + hidden / FP8_SCALE_GROUP * 4
    return BF16_BYTES * hidden


@dataclass(frozen=True)
class LayerShape:
    """What the costs need from the model and the micro-batch."""

    model: ModelConfig
    tokens_per_rank: int
    seq_len: int
    compute_dtype: str = "bf16"

    @property
    def hidden(self) -> int:
        return self.model.hidden_size


def _attention_dims(model: ModelConfig) -> tuple[int, int]:
    if model.attention == "mla":
        return model.qk_nope_head_dim + model.qk_rope_head_dim, model.v_head_dim
    return model.head_dim, model.head_dim


def attention_block_s(shape: LayerShape, gpu: GpuSpec, slowdown: float, backward: bool) -> float:
    """Attention block of one layer: projections, attention core, norms/residuals."""
    m, h = shape.tokens_per_rank, shape.hidden
    proj_n = attention_matmul_params(shape.model) / h
    qk, v = _attention_dims(shape.model)
    core: dict[str, Any] = dict(
        tokens=m,
        seq_len=shape.seq_len,
        n_heads=shape.model.num_attention_heads,
        qk_head_dim=qk,
        v_head_dim=v,
        dtype=shape.compute_dtype,
        slowdown=slowdown,
    )
    norms = memory_bound_time_s(gpu, 6.0 * m * h * BF16_BYTES, slowdown)
    if backward:
        return float(
            gemm_backward_time_s(gpu, m, proj_n, h, shape.compute_dtype, slowdown)
            + attention_backward_time_s(gpu, **core)
            + 2 * norms
        )
    return float(
        gemm_time_s(gpu, m, proj_n, h, shape.compute_dtype, slowdown)
        + attention_time_s(gpu, **core)
        + norms
    )


def router_s(shape: LayerShape, gpu: GpuSpec, slowdown: float) -> float:
    """Gate GEMM plus permuting the token copies into expert order."""
    m, h, model = shape.tokens_per_rank, shape.hidden, shape.model
    gate = gemm_time_s(gpu, m, model.n_routed_experts, h, "bf16", slowdown)
    permute = memory_bound_time_s(gpu, 2.0 * m * model.top_k * h * BF16_BYTES, slowdown)
    return float(gate + permute)


def experts_s(
    shape: LayerShape, gpu: GpuSpec, local_load: np.ndarray, slowdown: float, backward: bool
) -> float:
    """Grouped expert GEMMs over the tokens each local expert received, plus shared experts."""
    model, h, dt = shape.model, shape.hidden, shape.compute_dtype
    ffn = model.moe_intermediate_size
    up_n = (2 if model.gated_ffn else 1) * ffn
    grouped = grouped_gemm_backward_time_s if backward else grouped_gemm_time_s
    t: float = grouped(gpu, local_load, h, up_n, dt, slowdown) + grouped(
        gpu, local_load, ffn, h, dt, slowdown
    )
    if model.n_shared_experts:
        sffn = model.shared_expert_intermediate_size * model.n_shared_experts
        dense = gemm_backward_time_s if backward else gemm_time_s
        m = shape.tokens_per_rank
        t += float(dense(gpu, m, (2 if model.gated_ffn else 1) * sffn, h, dt, slowdown))
        t += float(dense(gpu, m, h, sffn, dt, slowdown))
    act = float(
        memory_bound_time_s(gpu, 3.0 * float(local_load.sum()) * ffn * BF16_BYTES, slowdown)
    )
    return float(t + (2 if backward else 1) * act)


def unpermute_s(shape: LayerShape, gpu: GpuSpec, slowdown: float) -> float:
    """Weighted sum of the returned token copies back into token order."""
    m, h = shape.tokens_per_rank, shape.hidden
    return float(memory_bound_time_s(gpu, 2.0 * m * shape.model.top_k * h * BF16_BYTES, slowdown))


@dataclass(frozen=True)
class LayerCosts:
    """Per-rank compute times (seconds) of one layer's ops, forward and backward."""

    attn_fwd: np.ndarray
    router: np.ndarray
    experts_fwd: np.ndarray
    unpermute: np.ndarray
    attn_bwd: np.ndarray
    experts_bwd: np.ndarray


def layer_costs(
    shape: LayerShape, gpu: GpuSpec, routing: RoutingResult, slowdown: np.ndarray
) -> LayerCosts:
    """Costs of every op on every EP rank for one routed layer."""
    n = routing.n_ranks
    load = routing.expert_load()
    per_rank = [load[routing.experts_on(r)] for r in range(n)]

    def each(fn: object) -> np.ndarray:
        return np.array([fn(r) for r in range(n)])  # type: ignore[operator]

    return LayerCosts(
        attn_fwd=each(lambda r: attention_block_s(shape, gpu, float(slowdown[r]), False)),
        router=each(lambda r: router_s(shape, gpu, float(slowdown[r]))),
        experts_fwd=each(lambda r: experts_s(shape, gpu, per_rank[r], float(slowdown[r]), False)),
        unpermute=each(lambda r: unpermute_s(shape, gpu, float(slowdown[r]))),
        attn_bwd=each(lambda r: attention_block_s(shape, gpu, float(slowdown[r]), True)),
        experts_bwd=each(lambda r: experts_s(shape, gpu, per_rank[r], float(slowdown[r]), True)),
    )
