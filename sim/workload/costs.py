"""Compute time of each op of one MoE layer on each EP rank (roofline).

The costs follow the routing: a rank's grouped expert GEMM costs what the
tokens its local experts actually received cost, so router skew turns into a
straggler here. Backward GEMMs cost dgrad + wgrad (twice the forward FLOPs).

Tensor parallelism with sequence parallelism (``LayerShape.tp``, Megatron-Core): between
layers a rank holds ``tokens_per_rank`` tokens (its sequence shard); the attention block (and
a dense FFN, and shared experts) run on the TP group's all-gathered tokens
(:attr:`LayerShape.gathered_tokens`) with ``1/tp`` of the heads / FFN columns. Norms, the
router and the routed experts work on the rank's own tokens. All attention projections are
taken as TP-sharded (MLA's down-projections are replicated in some Megatron versions: not
modelled). Context parallelism (``LayerShape.cp``): each CP rank's queries attend to the whole
sequence; with Megatron's load-balanced causal chunking the attention-core FLOPs per CP rank
are ``1/cp`` of the sequence's.
"""

from __future__ import annotations

from typing import TypeVar

import numpy as np

from moesim.calibration import DROPLESS_SYNC_S
from moesim.hardware import (
    AttentionShape,
    GemmShape,
    GpuSpec,
    attention_time_s,
    cast_time_s,
    gemm_time_s,
    get_precision,
    grouped_gemm_time_s,
    memory_bound_time_s,
)
from moesim.hardware.roofline import grouped_gemm_rows_time_s
from moesim.model import ModelConfig
from moesim.model.accounting import attention_matmul_params
from moesim.router import RoutingResult
from moesim.workload.elementwise import permute_bytes, with_elementwise
from moesim.workload.shape import BF16_BYTES, LayerCosts, LayerShape

FloatLike = TypeVar("FloatLike", float, np.ndarray)

FP8_SCALE_GROUP = 128  # DeepEP FP8 dispatch: one fp32 scale per 128 elements
WIRE_DTYPES = ("fp8", "bf16")


def token_bytes(hidden: int, dtype: str) -> float:
    """Bytes one token's hidden state takes on the wire in ``dtype``."""
    if dtype == "fp8":
        return hidden + hidden / FP8_SCALE_GROUP * 4
    return BF16_BYTES * hidden


def _attention_dims(model: ModelConfig) -> tuple[int, int]:
    if model.attention == "mla":
        return model.qk_nope_head_dim + model.qk_rope_head_dim, model.v_head_dim
    return model.head_dim, model.head_dim


def kv_bytes_per_token(model: ModelConfig, tp: int = 1) -> float:
    """bf16 K and V of one token for one TP rank's heads: what ring attention (context
    parallelism, Transformer Engine) passes between CP ranks. GQA/MHA: ``kv_heads/tp`` heads of
    K and V; MLA: the attention core gets the up-projected per-head K (nope + rope) and V of
    ``heads/tp`` heads (Megatron-Core ``MultiLatentAttention`` hands those to TE)."""
    if model.attention == "mla":
        qk, v = _attention_dims(model)
        return float(model.num_attention_heads // tp * (qk + v) * BF16_BYTES)
    return float(model.num_key_value_heads // tp * 2 * model.head_dim * BF16_BYTES)


def attention_core_s(shape: LayerShape, gpu: GpuSpec, slowdown: float, backward: bool) -> float:
    """Attention core (flash attention) of one TP rank: its heads, the gathered queries. BF16
    whatever ``compute_dtype`` the GEMMs use (DeepSeek-V3's FP8 training keeps the attention
    operators in BF16, technical report section 3.3.1)."""
    qk, v = _attention_dims(shape.model)
    core = AttentionShape(tokens=shape.gathered_tokens, seq_len=shape.seq_len,
                          n_heads=shape.model.num_attention_heads // shape.tp, qk_head_dim=qk,
                          v_head_dim=v, dtype="bf16")
    return float(attention_time_s(gpu, core, slowdown, backward=backward))


def _casts_s(shape: LayerShape, gpu: GpuSpec, m: float, n: float, k: float, slowdown: float,
             backward: bool) -> float:
    """Quantisation kernels of the GEMM ``Y[m,n] = X[m,k] @ W[k,n]`` in the layer's precision
    (:mod:`moesim.hardware.precision`): forward ``X`` (m k elements), backward ``dY`` (m n)."""
    return float(cast_time_s(gpu, m * (n if backward else k), shape.compute_dtype, slowdown))


def _casts_rows_s(shape: LayerShape, gpu: GpuSpec, m: np.ndarray, n: float, k: float,
                  slow: np.ndarray, backward: bool) -> np.ndarray:
    """:func:`_casts_s` of each rank's ``m`` rows at its ``slow``: the same values bit for bit."""
    elements = m * (n if backward else k)
    out = np.zeros_like(elements)
    for size in get_precision(shape.compute_dtype).cast_bytes:
        out = out + memory_bound_time_s(gpu, elements * size, 1.0) * slow
    return out


def mla_up_proj_s(shape: LayerShape, gpu: GpuSpec) -> float:
    """Forward of an MLA layer's up-projections: query (q_lora_rank -> heads x (nope + rope))
    and key/value (kv_lora_rank -> heads x (nope + v)), TP-sharded, on the gathered tokens, in
    the layer's GEMM precision with their input casts (what ``mla_up_proj`` recompute runs
    again; a part of :func:`attention_block_s`'s projections)."""
    model, m, tp = shape.model, shape.gathered_tokens, shape.tp
    heads = model.num_attention_heads // tp
    q_n = heads * (model.qk_nope_head_dim + model.qk_rope_head_dim)
    kv_n = heads * (model.qk_nope_head_dim + model.v_head_dim)
    total = 0.0
    for n, k in ((q_n, model.q_lora_rank or 0), (kv_n, model.kv_lora_rank)):
        if k:
            total += float(gemm_time_s(gpu, GemmShape(m, n, k, shape.gemm_dtype)))
            total += _casts_s(shape, gpu, m, n, k, 1.0, False)
    return total


def attention_block_s(shape: LayerShape, gpu: GpuSpec, slowdown: float, backward: bool) -> float:
    """Attention block of one layer: projections, attention core, norms/residuals."""
    m, h = shape.gathered_tokens, shape.hidden
    proj_n = attention_matmul_params(shape.model) / h / shape.tp
    norms = memory_bound_time_s(gpu, 6.0 * shape.tokens_per_rank * h * BF16_BYTES, slowdown)
    core = attention_core_s(shape, gpu, slowdown, backward)
    casts = _casts_s(shape, gpu, m, proj_n, h, slowdown, backward)
    proj = gemm_time_s(gpu, shape.gemm(m, proj_n, h), slowdown, backward=backward)
    return float(proj + core + (2 * norms if backward else norms) + casts)


def ffn_s(
    shape: LayerShape, gpu: GpuSpec, intermediate: int, slowdown: float, backward: bool
) -> float:
    """A dense FFN (or the shared experts) of ``intermediate`` columns, TP-sharded, on the
    gathered tokens."""
    m, h, model = shape.gathered_tokens, shape.hidden, shape.model
    ffn = intermediate // shape.tp
    up_n = (2 if model.gated_ffn else 1) * ffn
    up = float(gemm_time_s(gpu, shape.gemm(m, up_n, h), slowdown, backward=backward))
    down = float(gemm_time_s(gpu, shape.gemm(m, h, ffn), slowdown, backward=backward))
    casts = (_casts_s(shape, gpu, m, up_n, h, slowdown, backward)
             + _casts_s(shape, gpu, m, h, ffn, slowdown, backward))
    return up + down + casts


def router_s(shape: LayerShape, gpu: GpuSpec, slowdown: float) -> float:
    """Gate GEMM, the dropless token-count sync (the GPU idles
    :data:`~moesim.calibration.DROPLESS_SYNC_S` while the host reads the per-expert counts;
    every MoE layer here is dropless), then permuting the token copies into expert order."""
    m, h, model = shape.tokens_per_rank, shape.hidden, shape.model
    gate = gemm_time_s(gpu, GemmShape(m, model.n_routed_experts, h), slowdown)
    permute = memory_bound_time_s(gpu, permute_bytes(shape), slowdown)
    return float(gate + DROPLESS_SYNC_S * slowdown + permute)


def experts_s(
    shape: LayerShape, gpu: GpuSpec, local_load: np.ndarray, slowdown: float, backward: bool
) -> float:
    """Grouped expert GEMMs over the tokens each local expert received, plus shared experts
    when ``tp == 1`` (with TP they run TP-sharded between their own all-gather and
    reduce-scatter, as Megatron's ``SharedExpertMLP``: :func:`ffn_s`, outside this op).

    With ``etp > 1`` each expert's FFN columns are split over the ETP group, which all-gathers
    its members' dispatched tokens first: ``etp`` times ``local_load`` (every EP group routes
    alike) through ``1/etp`` of the columns."""
    model, h = shape.model, shape.hidden
    ffn = model.moe_intermediate_size // shape.etp
    local_load = local_load * shape.etp
    up_n = (2 if model.gated_ffn else 1) * ffn
    # expert e: [load_e, h] @ [h, up_n]
    up, down = shape.gemm(local_load, up_n, h), shape.gemm(local_load, h, ffn)
    rows = float(local_load.sum())
    t: float = grouped_gemm_time_s(gpu, up, slowdown, backward=backward) + grouped_gemm_time_s(
        gpu, down, slowdown, backward=backward
    ) + _casts_s(shape, gpu, rows, up_n, h, slowdown, backward) + _casts_s(
        shape, gpu, rows, h, ffn, slowdown, backward)
    if model.n_shared_experts and shape.tp == 1:  # tp = 1: on the rank's own tokens
        sffn = model.shared_expert_intermediate_size * model.n_shared_experts
        t += ffn_s(shape, gpu, sffn, slowdown, backward)
    act = float(memory_bound_time_s(gpu, act_bytes(float(local_load.sum()), ffn), slowdown))
    return float(t + (2 if backward else 1) * act)


def act_bytes(rows: FloatLike, ffn: int) -> FloatLike:
    """HBM bytes of the routed experts' gated activation over ``rows`` token copies of ``ffn``
    columns: read the fc1 output's two halves, write one (BF16)."""
    return 3.0 * rows * ffn * BF16_BYTES


def moe_act_s(shape: LayerShape, gpu: GpuSpec, copies: np.ndarray) -> np.ndarray:
    """The routed experts' activation forward on each EP rank that received ``copies`` token
    copies (what ``moe_act`` recompute runs again): the kernel :func:`experts_s` charges."""
    ffn = shape.model.moe_intermediate_size // shape.etp
    rows = np.asarray(copies, dtype=float) * shape.etp
    return np.asarray(memory_bound_time_s(gpu, act_bytes(rows, ffn)), dtype=float)


def norms_recompute_s(shape: LayerShape, gpu: GpuSpec) -> float:
    """The input and pre-MLP layernorms' forward (what ``layernorm`` recompute runs again):
    two kernels, each reading and writing the rank's own tokens' hidden states in BF16."""
    one = memory_bound_time_s(gpu, 2.0 * shape.tokens_per_rank * shape.hidden * BF16_BYTES)
    return 2.0 * float(one)


def experts_ranks_s(
    shape: LayerShape, gpu: GpuSpec, local_load: np.ndarray, slowdown: np.ndarray,
    backward: bool,
) -> np.ndarray:
    """:func:`experts_s` of every row of ``local_load`` [ranks, local experts] at that rank's
    ``slowdown``, vectorised over ranks: the same values bit for bit (same float operations in
    the same order)."""
    model, h = shape.model, shape.hidden
    ffn = model.moe_intermediate_size // shape.etp
    local_load = local_load * shape.etp
    up_n = (2 if model.gated_ffn else 1) * ffn
    slow = np.asarray(slowdown, dtype=float)
    # a row per rank, a column per local expert
    up, down = shape.gemm(local_load, up_n, h), shape.gemm(local_load, h, ffn)
    rows = local_load.sum(axis=1).astype(float)
    t = (grouped_gemm_rows_time_s(gpu, up, slow, backward=backward)
         + grouped_gemm_rows_time_s(gpu, down, slow, backward=backward)
         + _casts_rows_s(shape, gpu, rows, up_n, h, slow, backward)
         + _casts_rows_s(shape, gpu, rows, h, ffn, slow, backward))
    if model.n_shared_experts and shape.tp == 1:  # tp = 1: on the rank's own tokens
        sffn = model.shared_expert_intermediate_size * model.n_shared_experts
        values, which = np.unique(slow, return_inverse=True)
        t += np.array([ffn_s(shape, gpu, sffn, float(v), backward) for v in values])[which]
    act = memory_bound_time_s(gpu, act_bytes(local_load.sum(axis=1).astype(float), ffn),
                              1.0) * slow
    return t + (2 if backward else 1) * act


def _experts_by_rank(
    shape: LayerShape, gpu: GpuSpec, routing: RoutingResult, slowdown: np.ndarray,
    backward: bool,
) -> np.ndarray:
    """:func:`experts_ranks_s` of every EP rank of ``routing``; ranks grouped by how many
    experts they host (one vectorised pass per group; usually one)."""
    n = routing.n_ranks
    load, host = routing.expert_load(), routing.expert_to_rank
    order = np.argsort(host, kind="stable")  # experts by rank, ascending ids within a rank
    counts = np.bincount(host, minlength=n)
    starts = np.cumsum(counts) - counts
    out = np.empty(n)
    slow = np.asarray(slowdown, dtype=float)[:n]
    for count in sorted(set(counts.tolist())):  # not np.unique: it imports numpy.ma
        ranks = np.flatnonzero(counts == count)
        ids = order[starts[ranks][:, None] + np.arange(count)[None, :]]
        out[ranks] = experts_ranks_s(shape, gpu, load[ids], slow[ranks], backward)
    return out


def unpermute_s(shape: LayerShape, gpu: GpuSpec, slowdown: float) -> float:
    """Weighted sum of the returned token copies back into token order."""
    return float(memory_bound_time_s(gpu, permute_bytes(shape), slowdown))


def layer_costs(
    shape: LayerShape, gpu: GpuSpec, routing: RoutingResult, slowdown: np.ndarray
) -> LayerCosts:
    """Costs of every op on every EP rank for one routed layer."""
    n = routing.n_ranks
    slow, which = np.unique(np.asarray(slowdown, dtype=float)[:n], return_inverse=True)

    def per_slowdown(fn: object) -> np.ndarray:
        """An op that costs the same on every rank of one slowdown: priced once per value."""
        return np.array([fn(float(s)) for s in slow])[which]  # type: ignore[operator]

    costs = LayerCosts(
        attn_fwd=per_slowdown(lambda s: attention_block_s(shape, gpu, s, False)),
        router=per_slowdown(lambda s: router_s(shape, gpu, s)),
        experts_fwd=_experts_by_rank(shape, gpu, routing, slowdown, False),
        unpermute=per_slowdown(lambda s: unpermute_s(shape, gpu, s)),
        attn_bwd=per_slowdown(lambda s: attention_block_s(shape, gpu, s, True)),
        experts_bwd=_experts_by_rank(shape, gpu, routing, slowdown, True),
    )
    return with_elementwise(costs, shape, gpu, slowdown)  # rotary, permute bwd (see there)
