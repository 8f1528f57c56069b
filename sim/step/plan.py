"""The static part of a step: which layers each chunk holds, what each layer costs, what moves.

Routing is drawn once per MoE layer (``route_tokens`` with ``n_ranks = ep``, micro-batch 0)
and reused for every micro-batch and every EP group: all EP groups are assumed symmetric.
Resampling per micro-batch and per group is future work. Compute costs follow
:mod:`sim.workload.costs` (roofline, per EP rank, no slowdowns); dense FFN layers cost
their GEMMs (:func:`sim.hardware.gemm_time_s`).
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import pairwise

import numpy as np

from sim.hardware import GpuSpec, gemm_backward_time_s, gemm_time_s, get_gpu
from sim.layout import ParallelLayout
from sim.model.accounting import embedding_params, layer_params
from sim.router import RoutingResult, route_tokens
from sim.step.spec import StepSpec
from sim.workload.costs import LayerCosts, LayerShape, attention_block_s, layer_costs
from sim.workload.moe_stack import WireFormat

A2A_TRANSPOSED = ("combine", "dispatch_bwd")
"""These all-to-alls send the transpose of the dispatch matrix (tokens go back)."""


@dataclass(frozen=True)
class LayerPlan:
    """One decoder layer: MoE (per-EP-rank costs, a2a byte matrices) or dense (scalar costs)."""

    index: int
    moe: LayerCosts | None
    a2a_bytes: dict[str, np.ndarray]  # phase -> [sender, receiver] bytes (MoE only)
    dense_fwd_s: float = 0.0  # attention + dense FFN (dense layers only)
    dense_bwd_s: float = 0.0


@dataclass(frozen=True)
class StepPlan:
    """Everything the rank programs read: layers per virtual stage, costs, sizes."""

    gpu: GpuSpec
    layers: tuple[LayerPlan, ...]
    chunk_layers: tuple[tuple[int, ...], ...]  # virtual stage -> layer indices
    act_bytes: float  # activations (or their gradients) between stages, per micro-batch
    head_fwd_s: float
    head_bwd_s: float
    dense_params: tuple[int, ...]  # per pipeline stage, per GPU
    expert_params: tuple[int, ...]  # per pipeline stage, per GPU
    layer_params: tuple[tuple[int, int], ...]  # per layer: (dense, expert) per GPU
    extra_dense: tuple[int, ...]  # per virtual stage: embedding / LM head + final norm


def chunk_layers(lay: ParallelLayout, num_layers: int) -> tuple[tuple[int, ...], ...]:
    """Layer indices of each virtual stage ``c * pp + s``, in model order.

    Stage ``s`` gets ``lay.stage_layers`` layers, split over its ``vpp`` chunks as evenly as
    possible (earlier chunks take the remainder).
    """
    stage_counts = lay.stage_layers(num_layers)
    counts = [0] * (lay.pp * lay.vpp)
    for s, n in enumerate(stage_counts):
        for c in range(lay.vpp):
            counts[c * lay.pp + s] = n // lay.vpp + (1 if c < n % lay.vpp else 0)
    bounds = np.concatenate([[0], np.cumsum(counts)])
    return tuple(tuple(range(int(a), int(b))) for a, b in pairwise(bounds))


def route_layer(spec: StepSpec, layer: int) -> RoutingResult:
    """Routing of MoE layer ``layer`` (shared by every micro-batch and EP group)."""
    m = spec.model
    return route_tokens(
        spec.router, tokens_per_rank=spec.tokens_per_microbatch, n_ranks=spec.layout.ep,
        n_experts=m.n_routed_experts, top_k=m.top_k, seed=spec.seed, layer=layer,
        n_group=m.n_group, topk_group=m.topk_group,
    )


def _a2a_bytes(spec: StepSpec, routing: RoutingResult) -> dict[str, np.ndarray]:
    wire = WireFormat(spec.model.hidden_size, spec.dispatch_dtype, spec.combine_dtype)
    tokens = (routing.rank_tokens_dedup if spec.dedup else routing.rank_tokens).astype(float)
    return {
        ph: (tokens.T if ph in A2A_TRANSPOSED else tokens) * wire.per_token(ph)
        for ph in ("dispatch", "combine", "combine_bwd", "dispatch_bwd")
    }


def _dense_layer(spec: StepSpec, gpu: GpuSpec, shape: LayerShape, index: int) -> LayerPlan:
    m, model = spec.tokens_per_microbatch, spec.model
    h, ffn = model.hidden_size, model.intermediate_size
    up = (2 if model.gated_ffn else 1) * ffn
    fwd = float(gemm_time_s(gpu, m, up, h) + gemm_time_s(gpu, m, h, ffn))
    bwd = float(gemm_backward_time_s(gpu, m, up, h) + gemm_backward_time_s(gpu, m, h, ffn))
    return LayerPlan(
        index, None, {},
        attention_block_s(shape, gpu, 1.0, False) + fwd,
        attention_block_s(shape, gpu, 1.0, True) + bwd,
    )


def _layer_params(spec: StepSpec) -> tuple[tuple[int, int], ...]:
    """(dense, expert) parameters of each layer on one GPU (tp = 1, experts / ep)."""
    model, ep = spec.model, spec.layout.ep
    return tuple(
        (d, e // ep) for d, e in (layer_params(model, i) for i in range(model.num_layers))
    )


def _extra_dense(spec: StepSpec, n_virtual: int) -> tuple[int, ...]:
    """Non-layer dense parameters of each virtual stage: embedding first, LM head + norm last."""
    emb_in, emb_out = embedding_params(spec.model)
    extra = [0] * n_virtual
    extra[0] += emb_in
    extra[-1] += emb_out + spec.model.hidden_size
    return tuple(extra)


def _params_per_stage(
    pp: int, chunks: tuple[tuple[int, ...], ...], per_layer: tuple[tuple[int, int], ...],
    extra: tuple[int, ...],
) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """(dense, expert) parameters each GPU of each pipeline stage holds."""
    dense, expert = [0] * pp, [0] * pp
    for vs, layers in enumerate(chunks):
        dense[vs % pp] += extra[vs] + sum(per_layer[i][0] for i in layers)
        expert[vs % pp] += sum(per_layer[i][1] for i in layers)
    return tuple(dense), tuple(expert)


def build_plan(spec: StepSpec) -> StepPlan:
    """Layer costs, chunk contents and sizes of ``spec``."""
    gpu = get_gpu(spec.gpu)
    model, m = spec.model, spec.tokens_per_microbatch
    shape = LayerShape(model, m, spec.seq_len)
    ones = np.ones(spec.layout.ep)
    layers = []
    for layer in range(model.num_layers):
        if model.moe_layers[layer]:
            routing = route_layer(spec, layer)
            costs = layer_costs(shape, gpu, routing, ones)
            layers.append(LayerPlan(layer, costs, _a2a_bytes(spec, routing)))
        else:
            layers.append(_dense_layer(spec, gpu, shape, layer))
    chunks = chunk_layers(spec.layout, model.num_layers)
    per_layer, extra = _layer_params(spec), _extra_dense(spec, len(chunks))
    dense, expert = _params_per_stage(spec.layout.pp, chunks, per_layer, extra)
    head_fwd = float(gemm_time_s(gpu, m, model.vocab_size, model.hidden_size))
    head_bwd = float(gemm_backward_time_s(gpu, m, model.vocab_size, model.hidden_size))
    return StepPlan(
        gpu, tuple(layers), chunks, 2.0 * m * model.hidden_size,
        head_fwd if spec.lm_head else 0.0, head_bwd if spec.lm_head else 0.0, dense, expert,
        per_layer, extra,
    )
