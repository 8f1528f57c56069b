"""The weight-gradient (W) part of each layer's backward, for schedules that defer it.

A GEMM ``Y = X W`` has a backward of two kernels (:func:`moesim.hardware.gemm_time_s`):
dgrad ``dX = dY W^T`` (what the previous stage waits for) and wgrad ``dW = X^T dY`` (needed
only by the optimizer). DualPipe, like zero-bubble pipelines, runs the dgrad part as "B" and
defers the wgrad part as "W" (:mod:`moesim.schedule.builders`). The split is the model's own:
W is the wgrad kernels of exactly the GEMMs the backward costs (:mod:`moesim.workload.costs`:
attention projections, dense FFN or shared experts, each rank's grouped routed-expert GEMMs on
the tokens its experts received, and the LM head), priced by the same roofline; the rest of
the backward (dgrad kernels, the attention core's backward, FP8 casts of ``dY``, norms,
activations, permutes, recompute) stays in B. The router's gate has no backward in the model.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from moesim.hardware import GpuSpec
from moesim.hardware.roofline import gemm_wgrad_time_s, grouped_gemm_rows_wgrad_time_s
from moesim.model.accounting import attention_matmul_params
from moesim.router import RoutingResult
from moesim.workload.shape import LayerCosts, LayerShape


def attention_wgrad_s(shape: LayerShape, gpu: GpuSpec) -> float:
    """The wgrad kernel of the attention block's projections (TP-sharded, gathered tokens)."""
    m, h = shape.gathered_tokens, shape.hidden
    proj_n = attention_matmul_params(shape.model) / h / shape.tp
    return float(gemm_wgrad_time_s(gpu, shape.gemm(m, proj_n, h)))


def ffn_wgrad_s(shape: LayerShape, gpu: GpuSpec, intermediate: int) -> float:
    """The wgrad kernels of a dense FFN (or the shared experts) of ``intermediate`` columns."""
    m, h = shape.gathered_tokens, shape.hidden
    ffn = intermediate // shape.tp
    up_n = (2 if shape.model.gated_ffn else 1) * ffn
    return float(gemm_wgrad_time_s(gpu, shape.gemm(m, up_n, h))
                 + gemm_wgrad_time_s(gpu, shape.gemm(m, h, ffn)))


def experts_wgrad_s(shape: LayerShape, gpu: GpuSpec, routing: RoutingResult) -> np.ndarray:
    """Per EP rank: the grouped wgrad kernels of its routed experts on the tokens they
    received (as :func:`moesim.workload.costs.experts_s`), plus the shared experts' with
    ``tp == 1`` (inside the experts op there)."""
    model, h = shape.model, shape.hidden
    ffn = model.moe_intermediate_size // shape.etp
    up_n = (2 if model.gated_ffn else 1) * ffn
    load, host, n = routing.expert_load(), routing.expert_to_rank, routing.n_ranks
    order = np.argsort(host, kind="stable")  # experts by rank (as costs._experts_by_rank)
    counts = np.bincount(host, minlength=n)
    starts = np.cumsum(counts) - counts
    out = np.zeros(n)
    for count in sorted(set(counts.tolist())):  # one pass per experts-per-rank group
        ranks = np.flatnonzero(counts == count)
        rows = load[order[starts[ranks][:, None] + np.arange(count)[None, :]]] * shape.etp
        out[ranks] = (grouped_gemm_rows_wgrad_time_s(gpu, shape.gemm(rows, up_n, h))
                      + grouped_gemm_rows_wgrad_time_s(gpu, shape.gemm(rows, h, ffn)))
    if model.n_shared_experts and shape.tp == 1:
        out += ffn_wgrad_s(shape, gpu, model.shared_expert_intermediate_size
                           * model.n_shared_experts)
    return out


def input_grad_costs(costs: LayerCosts, attn_w_s: float, experts_w: np.ndarray) -> LayerCosts:
    """``costs`` with the backward ops' wgrad parts taken out (what a deferring B runs)."""
    return replace(costs, attn_bwd=costs.attn_bwd - attn_w_s,
                   experts_bwd=costs.experts_bwd - experts_w)
