"""The static part of a step: which layers each chunk holds, what each layer costs, what moves.

Routing is drawn once per MoE layer (``route_tokens`` with ``n_ranks = ep``, micro-batch 0)
and reused for every micro-batch and every EP group: all EP groups are assumed symmetric.
Resampling per micro-batch and per group is future work. Compute costs follow
:mod:`moesim.workload.costs` (roofline, per EP rank, no slowdowns); dense FFN layers cost
their GEMMs (:func:`moesim.hardware.gemm_time_s`).

With tp > 1 (sequence parallel) each rank routes its own ``seq / (tp * cp)`` tokens; attention,
dense FFNs, shared experts and the LM head are TP-sharded (``1/tp`` of the heads, columns or
vocabulary) on the gathered tokens; parameters per GPU are the TP shard of everything but the
norms and the router (replicated), and the routed experts' ``1/ep``. The LM head's own
all-gather / reduce-scatter is not simulated (its GEMM is). With etp > 1 each routed expert's
FFN is split over the ETP group (``1/(ep*etp)`` of the expert parameters per GPU).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from itertools import pairwise

import numpy as np

from moesim.calibration.training import HOT_RATIO
from moesim.hardware import GemmShape, GpuSpec, gemm_backward_time_s, gemm_time_s, get_gpu
from moesim.hardware.roofline import gemm_wgrad_time_s
from moesim.model.accounting import embedding_params, layer_params, router_params
from moesim.parallel.layout import ParallelLayout
from moesim.router import Draw, RoutingResult, count_tokens, draw_tokens
from moesim.step.mtp import mtp_head_s, mtp_params, with_mtp
from moesim.step.recompute import ModuleCosts, modules, recompute_s
from moesim.step.spec import GRAD_REDUCE_BYTES, StepSpec
from moesim.step.wgrad import attention_wgrad_s, experts_wgrad_s, ffn_wgrad_s, input_grad_costs
from moesim.workload.costs import (
    LayerCosts,
    LayerShape,
    attention_block_s,
    attention_core_s,
    ffn_s,
    kv_bytes_per_token,
    layer_costs,
)
from moesim.workload.dispatchers import get_dispatcher
from moesim.workload.moe_stack import WireFormat

A2A_TRANSPOSED = ("combine", "dispatch_bwd")
"""These all-to-alls send the transpose of the dispatch matrix (tokens go back)."""


@dataclass(frozen=True)
class LayerRouting:
    """What the critical path names of a MoE layer's routing: each EP coordinate's token load,
    and the three hottest experts of those at or over HOT_RATIO x the mean load (-1 elsewhere:
    the walk names no expert of the others)."""

    load: np.ndarray  # [ep] int64
    hot_experts: np.ndarray  # [ep, 3] int64


def layer_routing(routing: RoutingResult) -> LayerRouting:
    """The :class:`LayerRouting` of ``routing``."""
    load = routing.rank_load()
    hot = np.full((load.size, 3), -1, dtype=np.int64)
    for e in np.flatnonzero(load / max(load.mean(), 1e-30) >= HOT_RATIO).tolist():
        top = routing.hot_experts(e, 3)
        hot[e, : len(top)] = top
    return LayerRouting(load.astype(np.int64), hot)


@dataclass(frozen=True)
class LayerPlan:
    """One decoder layer: MoE (per-EP-rank costs, a2a byte matrices) or dense (scalar costs)."""

    index: int
    moe: LayerCosts | None
    a2a_bytes: dict[str, np.ndarray]  # phase -> [sender, receiver] bytes (MoE only)
    dense_fwd_s: float = 0.0  # attention + dense FFN (dense layers only)
    dense_bwd_s: float = 0.0
    ffn_fwd_s: float = 0.0  # dense FFN (part of dense_*_s) or TP-sharded shared experts (tp > 1)
    ffn_bwd_s: float = 0.0
    core_fwd_s: float = 0.0  # attention core, part of the attention block (ring attention)
    core_bwd_s: float = 0.0
    etp_bytes: dict[str, np.ndarray] | None = None  # a2a phase -> [ep coord] ETP ring buffer
    recompute_s: np.ndarray | None = None  # [ep coord] (MoE) or [1] (dense): forward compute
    # run again before this layer's backward (StepSpec.recompute); None = no recompute
    routing: LayerRouting | None = None  # MoE only: loads and hot experts (the walk record)
    wgrad_s: np.ndarray | None = None  # [ep coord] (MoE) or [1] (dense): the weight-gradient
    # part of the backward (moesim.step.wgrad), set when the schedule defers it (W ops)

    def wgrad_time_s(self, ep_coord: int) -> float:
        """Seconds of this layer's deferred weight gradient on EP coordinate ``ep_coord``."""
        if self.wgrad_s is None:
            return 0.0
        return float(self.wgrad_s[ep_coord if self.moe is not None else 0])

    @property
    def routed_copies(self) -> np.ndarray | None:
        """Token copies each EP coordinate's experts received (MoE only)."""
        return None if self.routing is None else self.routing.load

    def recompute_time_s(self, ep_coord: int) -> float:
        """Seconds of forward compute this layer runs again before its backward on EP
        coordinate ``ep_coord`` (0 without recompute)."""
        if self.recompute_s is None:
            return 0.0
        return float(self.recompute_s[ep_coord if self.moe is not None else 0])


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
    tp_bytes: float = 0.0  # a TP all-gather / reduce-scatter: the gathered bf16 hidden states
    cp_kv_bytes: float = 0.0  # one forward ring-attention send: the CP rank's K/V chunk
    input_grad_layers: tuple[LayerPlan, ...] = ()  # W-deferring schedules: each layer with
    # its backward costs less their weight-gradient part (what a "B" op with defer_w runs)
    head_wgrad_s: float = 0.0  # the LM head's wgrad kernel (deferred with its chunk's W)


def chunk_layers(lay: ParallelLayout, num_layers: int) -> tuple[tuple[int, ...], ...]:
    """Layer indices of each virtual stage ``c * pp + s``, in model order: as many as
    :meth:`ParallelLayout.virtual_stage_layers` gives it (Megatron's stage-split options, else
    ``lay.stage_layers`` split over each stage's vpp chunks, earlier chunks taking the
    remainder). A virtual stage may hold none (the embedding or the loss alone)."""
    bounds = np.concatenate([[0], np.cumsum(lay.virtual_stage_layers(num_layers))])
    return tuple(tuple(range(int(a), int(b))) for a, b in pairwise(bounds))


Route = Callable[[StepSpec, int], RoutingResult]
"""(spec, MoE layer index) -> that layer's routing: :func:`route_layer`, or a mode's own
(fast mode's ``routing_draws`` reuses a few draws, :mod:`moesim.step.mode`)."""


def route_layer(spec: StepSpec, layer: int) -> RoutingResult:
    """Routing of MoE layer ``layer`` (shared by every micro-batch and EP group):
    :func:`count_layer` of :func:`draw_layer`."""
    return count_layer(spec, draw_layer(spec, layer))


def draw_layer(spec: StepSpec, layer: int) -> Draw:
    """The sampling half of :func:`route_layer` (:func:`moesim.router.draw_tokens`)."""
    m = spec.model
    return draw_tokens(
        spec.router, tokens_per_rank=spec.tokens_per_microbatch, n_ranks=spec.layout.ep,
        n_experts=m.n_routed_experts, top_k=m.top_k, seed=spec.seed, layer=layer,
        n_group=m.n_group, topk_group=m.topk_group, ranks_per_node=spec.forward_ranks(),
    )


def count_layer(spec: StepSpec, drawn: Draw) -> RoutingResult:
    """The counting half of :func:`route_layer` (:func:`moesim.router.count_tokens`)."""
    return count_tokens(drawn, ranks_per_node=spec.forward_ranks())


def _a2a_tokens(spec: StepSpec, routing: RoutingResult) -> np.ndarray:
    """Tokens each EP rank sends each EP rank in a dispatch (``spec.dispatcher``)."""
    return get_dispatcher(spec.dispatcher).tokens(routing, dedup=spec.dedup,
                                                  node_ranks=spec.forward_ranks())


def _a2a_bytes(spec: StepSpec, routing: RoutingResult) -> dict[str, np.ndarray]:
    """[sender, receiver] bytes of each all-to-all: dispatch-shaped phases carry the
    dispatcher's per-message header (DeepEP low-latency's 16 bytes), the transposed ones not."""
    wire = WireFormat(spec.model.hidden_size, spec.dispatch_dtype, spec.combine_dtype)
    tokens = _a2a_tokens(spec, routing)
    header = get_dispatcher(spec.dispatcher).header_bytes
    return {
        ph: (tokens.T * wire.per_token(ph) if ph in A2A_TRANSPOSED
             else tokens * (wire.per_token(ph) + header))
        for ph in ("dispatch", "combine", "combine_bwd", "dispatch_bwd")
    }


def _dense_layer(gpu: GpuSpec, shape: LayerShape, index: int,
                 core_s: tuple[float, float]) -> LayerPlan:
    ffn = shape.model.intermediate_size
    ffn_fwd, ffn_bwd = ffn_s(shape, gpu, ffn, 1.0, False), ffn_s(shape, gpu, ffn, 1.0, True)
    return LayerPlan(
        index, None, {},
        attention_block_s(shape, gpu, 1.0, False) + ffn_fwd,
        attention_block_s(shape, gpu, 1.0, True) + ffn_bwd,
        ffn_fwd, ffn_bwd, *core_s,
    )


def _moe_layer(spec: StepSpec, gpu: GpuSpec, shape: LayerShape, index: int,
               core_s: tuple[float, float], shared_s: tuple[float, float], route: Route,
               priced: dict[int, tuple[RoutingResult, LayerCosts, LayerRouting,
                                       np.ndarray | None]], split: bool = False
               ) -> LayerPlan:
    """A MoE layer; ``split``: its ``wgrad_s`` holds its experts' wgrad per EP rank
    (:func:`_split_w` adds the rest)."""
    routing = route(spec, index)
    known = priced.get(id(routing))  # a routing reused by ``route``: priced once
    if known is None or known[0] is not routing:
        known = priced[id(routing)] = (routing, layer_costs(shape, gpu, routing,
                                                            np.ones(spec.layout.ep)),
                                       layer_routing(routing),
                                       experts_wgrad_s(shape, gpu, routing) if split else None)
    costs = known[1]
    a2a = _a2a_bytes(spec, routing)
    return LayerPlan(
        index, costs, a2a, 0.0, 0.0, *shared_s, *core_s,
        _etp_bytes(a2a, spec.layout.etp) if spec.layout.etp > 1 else None, routing=known[2],
        wgrad_s=known[3],
    )


def _split_w(spec: StepSpec, gpu: GpuSpec, shape: LayerShape, layer: LayerPlan
             ) -> tuple[LayerPlan, LayerPlan]:
    """(``layer`` knowing its whole weight-gradient time, ``layer`` as a deferring B runs it):
    :mod:`moesim.step.wgrad`. A MoE layer comes with its experts' wgrad per EP rank in
    ``wgrad_s`` (:func:`_moe_layer`)."""
    attn_w = attention_wgrad_s(shape, gpu)
    model = spec.model
    if layer.moe is None:
        ffn_w = ffn_wgrad_s(shape, gpu, model.intermediate_size)
        whole = replace(layer, wgrad_s=np.array([attn_w + ffn_w]))
        return whole, replace(whole, dense_bwd_s=layer.dense_bwd_s - attn_w - ffn_w,
                              ffn_bwd_s=layer.ffn_bwd_s - ffn_w)
    experts_w = layer.wgrad_s
    assert experts_w is not None
    shared = model.shared_expert_intermediate_size * model.n_shared_experts
    ffn_w = ffn_wgrad_s(shape, gpu, shared) if layer.ffn_bwd_s else 0.0  # TP-sharded shared
    whole = replace(layer, wgrad_s=attn_w + experts_w + ffn_w)
    return whole, replace(whole, moe=input_grad_costs(layer.moe, attn_w, experts_w),
                          ffn_bwd_s=layer.ffn_bwd_s - ffn_w)


def _shared_experts_s(spec: StepSpec, gpu: GpuSpec, shape: LayerShape) -> tuple[float, float]:
    """(forward, backward) of the TP-sharded shared experts of a MoE layer; (0, 0) with tp = 1
    (then they are inside ``costs.experts_*``) or none."""
    model = spec.model
    shared = model.shared_expert_intermediate_size * model.n_shared_experts
    if shape.tp == 1 or shared <= 0:
        return 0.0, 0.0
    return ffn_s(shape, gpu, shared, 1.0, False), ffn_s(shape, gpu, shared, 1.0, True)


def _etp_bytes(a2a: dict[str, np.ndarray], etp: int) -> dict[str, np.ndarray]:
    """ETP ring buffers per EP coordinate: the tokens an expert rank received in ``dispatch``
    / ``combine_bwd`` (all-gathered over its ETP group before the expert GEMMs), and those it
    sends in ``combine`` / ``dispatch_bwd`` (reduce-scattered after them); ``etp`` members'
    worth, as every EP group routes alike."""
    arriving = {ph: a2a[ph].sum(axis=0) for ph in ("dispatch", "combine_bwd")}
    leaving = {ph: a2a[ph].sum(axis=1) for ph in ("combine", "dispatch_bwd")}
    return {ph: etp * b for ph, b in (arriving | leaving).items()}


def _layer_params(spec: StepSpec) -> tuple[tuple[int, int], ...]:
    """(dense, expert) parameters of each layer on one GPU: the TP shard of the dense part
    (norms and router replicated), the EP x ETP shard of the routed experts."""
    model, tp, ep = spec.model, spec.layout.tp, spec.layout.ep * spec.layout.etp
    out = []
    for i in range(model.num_layers):
        dense, expert = layer_params(model, i)
        replicated = 2 * model.hidden_size + (router_params(model) if model.moe_layers[i] else 0)
        out.append(((dense - replicated) // tp + replicated, expert // ep))
    return tuple(out)


def _extra_dense(spec: StepSpec, n_virtual: int) -> tuple[int, ...]:
    """Non-layer dense parameters of each virtual stage on one GPU: embedding first, LM head +
    final norm last (both vocabulary-parallel over TP, the norm replicated)."""
    emb_in, emb_out = embedding_params(spec.model)
    tp = spec.layout.tp
    extra = [0] * n_virtual
    extra[0] += emb_in // tp
    extra[-1] += emb_out // tp + spec.model.hidden_size
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


def build_plan(spec: StepSpec, route: Route = route_layer) -> StepPlan:
    """Layer costs, chunk contents and sizes of ``spec``; MoE layers routed by ``route``
    (layers given the same routing object share its cost table)."""
    gpu = get_gpu(spec.gpu)
    model, m, lay = spec.model, spec.tokens_per_microbatch, spec.layout
    shape = LayerShape(model, m, spec.seq_len, spec.compute_dtype, tp=lay.tp, cp=lay.cp,
                       etp=lay.etp, main_grad_bytes=GRAD_REDUCE_BYTES[spec.grad_reduce_dtype])
    core = attention_core_s(shape, gpu, 1.0, False), attention_core_s(shape, gpu, 1.0, True)
    shared = _shared_experts_s(spec, gpu, shape)
    priced: dict[int, tuple[RoutingResult, LayerCosts, LayerRouting, np.ndarray | None]] = {}
    recompute = spec.resolved_recompute()
    module_costs = ModuleCosts.of(model, gpu, shape, modules(recompute))
    split = any(op.defer_w for ops in spec.ops() for op in ops)  # the schedule has W ops
    moe = (*model.moe_layers, *[model.is_moe] * spec.mtp_layers)  # MTP blocks last (.mtp)
    layers = [
        _moe_layer(spec, gpu, shape, i, core, shared, route, priced, split)
        if moe[i] else _dense_layer(gpu, shape, i, core)
        for i in range(len(moe))
    ]
    layers = [replace(layer, recompute_s=recompute_s(layer, recompute, module_costs))
              for layer in layers]
    dgrad_layers: tuple[LayerPlan, ...] = ()
    if split:
        pairs = [_split_w(spec, gpu, shape, layer) for layer in layers]
        layers, dgrad_layers = [a for a, _ in pairs], tuple(b for _, b in pairs)
    chunks = with_mtp(spec, chunk_layers(spec.layout, model.num_layers))
    per_layer = (*_layer_params(spec), *[mtp_params(spec)] * spec.mtp_layers)
    extra = _extra_dense(spec, len(chunks))
    dense, expert = _params_per_stage(spec.layout.pp, chunks, per_layer, extra)
    vocab = -(-model.vocab_size // lay.tp)  # vocabulary-parallel head on the gathered tokens
    # (BF16 whatever the layers' compute_dtype, moesim.step.spec.COMPUTE_DTYPES)
    head = GemmShape(shape.gathered_tokens, vocab, model.hidden_size,
                     wgrad_out_bytes=shape.wgrad_out_bytes)
    mtp = mtp_head_s(spec, gpu, shape, head)
    head_fwd = float(gemm_time_s(gpu, head)) + mtp[0]
    head_bwd = float(gemm_backward_time_s(gpu, head)) + mtp[1]
    return StepPlan(
        gpu, tuple(layers), chunks, 2.0 * m * model.hidden_size,
        head_fwd if spec.lm_head else 0.0, head_bwd if spec.lm_head else 0.0, dense, expert,
        per_layer, extra, shape.tp_buffer_bytes,
        shape.gathered_tokens * kv_bytes_per_token(model, lay.tp), dgrad_layers,
        float(gemm_wgrad_time_s(gpu, head)) + mtp[2] if split and spec.lm_head else 0.0,
    )
