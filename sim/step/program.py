"""Every rank of the layout as one SimPy process walking its stage's schedule ops.

Per pass (see :mod:`moesim.schedule` for the orders):

* F of (micro-batch, chunk): wait for the activations from the previous virtual stage
  (a point-to-point flow from the rank with the same dp coordinate), run the chunk's layers
  forward, send the activations on. MoE layer: attn -> router -> dispatch a2a -> experts ->
  combine a2a -> unpermute (as :mod:`moesim.workload.moe_stack`); dense layer: attention + FFN.
  The last virtual stage also runs the LM head.
* B: the mirror image with the gradients: combine_bwd a2a -> experts_bwd -> dispatch_bwd a2a
  -> attn_bwd per MoE layer, in reverse layer order; each layer first runs again the forward
  compute its activation recompute needs (``StepSpec.recompute``: the memory plan's choice by
  default; ``LayerPlan.recompute_s``).
* A B op with ``defer_w`` (DualPipe) runs each layer's backward less its weight-gradient
  kernels (``StepPlan.input_grad_layers``, :mod:`moesim.step.wgrad`); the later W op of the
  same (micro-batch, chunk) computes them, and with ``dp_overlap`` the layers' gradient
  reduce-scatters start after it. Which stage runs a chunk is the schedule's placement
  (``StepState.place``; DualPipe: stages ``s`` and ``pp - 1 - s`` on one rank).
* An FB op (DualPipe) first waits for both passes' pipeline inputs (bubble), as DualPipe's
  ``_forward_backward_chunk`` does before it computes either (@bb214e8). With
  ``spec.fb_overlap`` its F and B then run as two concurrent processes sharing the rank's
  compute (capacity-1, FIFO), so one pass's all-to-all waits hide behind the other's compute,
  which runs on the SMs the all-to-all kernels leave (``OVERLAP_DISPATCHER_SMS``,
  ``StepState.overlap_compute_factor``; L2 / HBM interference not modelled); the time that is
  not compute is split over the categories in proportion to the two passes' waits. Without
  ``fb_overlap``, F then B.

Data parallelism follows Megatron's distributed optimizer: ring reduce-scatter of the bf16
gradients (dense parameters over the rank's DP group, routed experts over its EDP group), the
optimizer step (memory-bound) on the local shard (with an FP8 precision, plus quantising the
rank's weights once per step: booked as ``optimizer``), ring all-gather of the updated bf16
parameters. With ``spec.dp_overlap`` (Megatron ``--overlap-grad-reduce``, one bucket per
layer) each layer's reduce-scatter starts when the rank has run that layer's last backward
(embedding / LM-head grads with their chunk's), sharing the fabric with the remaining
backward traffic; otherwise all of them start after the last op. The all-gather runs after
the optimizer, exposed (``--overlap-param-gather`` is not modelled).

A rank's time is split into categories adding up to its finish time (``CATEGORIES``).
"""

from __future__ import annotations

import numpy as np
import simpy

from moesim.hardware import cast_time_s, memory_bound_time_s
from moesim.schedule.ops import Pass
from moesim.step.plan import LayerPlan
from moesim.step.sends import grads_done, pipeline_input, send
from moesim.step.state import (
    CATEGORIES,
    OPTIMIZER_BYTES_PER_PARAM,
    PARAM_BYTES,
    Generated,
    StepState,
)
from moesim.step.tpcp import cp_arrival, cp_send, tp_collective


def _wait(st: StepState, rank: int, category: str, event: simpy.Event,
          op: object = None) -> Generated:
    t0 = st.env.now
    value = yield event
    st.ledger[rank][CATEGORIES.index(category)] += st.env.now - t0
    st.record(rank, t0, category, event if op is None else op, value)


def _compute(st: StepState, rank: int, time_s: float) -> Generated:
    time_s *= float(st.slowdown[rank])
    if st.ledger[rank] is st.time_s_row[rank]:  # one pass at a time: no queueing
        st.ledger[rank][0] += time_s
        t0 = st.env.now
        yield st.env.timeout(time_s)
        st.record(rank, t0, "compute")
        return
    time_s *= st.overlap_compute_factor  # in an FB op: the all-to-all holds some SMs
    st.ledger[rank][0] += time_s
    with st.gpu[rank].request() as req:
        yield req
        t0 = st.env.now
        yield st.env.timeout(time_s)
        st.record(rank, t0, "compute")


def _a2a(st: StepState, rank: int, layer: LayerPlan, mb: int, phase: str) -> Generated:
    a2a = st.all_to_all(rank, layer, mb, phase)
    local = st.coords[rank]["ep"]
    st.sent_a2a(a2a, local, layer.index, phase)
    a2a.send(local)
    yield from _wait(st, rank, "a2a_exposed", a2a.received(local), a2a)


def _tp(st: StepState, rank: int, kind: str, key: tuple[object, ...]) -> Generated:
    """TP all-gather ("ag") or reduce-scatter ("rs") of ``key`` over ``rank``'s TP group."""
    if st.spec.layout.tp > 1:
        yield from _wait(st, rank, "tp_exposed", tp_collective(st, rank, kind, key))


def _tp_block(st: StepState, rank: int, key: tuple[object, ...], time_s: float) -> Generated:
    """A TP-sharded block (dense FFN, shared experts): all-gather, compute, reduce-scatter."""
    yield from _tp(st, rank, "ag", key)
    yield from _compute(st, rank, time_s)
    yield from _tp(st, rank, "rs", key)


def _etp(st: StepState, rank: int, layer: LayerPlan, mb: int, phase: str) -> Generated:
    """ETP all-gather of the tokens ``phase`` brought to the experts, or reduce-scatter of
    those it takes away (:mod:`moesim.step.tpcp`); nothing with etp = 1."""
    if layer.etp_bytes is None:
        return
    kind = "ag" if phase in ("dispatch", "combine_bwd") else "rs"
    size = float(layer.etp_bytes[phase][st.coords[rank]["ep"]])
    event = tp_collective(st, rank, kind, (layer.index, mb, phase), "etp", size)
    yield from _wait(st, rank, "tp_exposed", event)


def _attention(st: StepState, rank: int, layer: LayerPlan, key: tuple[object, ...],
               time_s: float, after_s: float = 0.0) -> Generated:
    """Attention block ``key`` = (layer, mb, pass): TP all-gather, projections, the core as
    ``cp`` ring-attention steps (:mod:`moesim.step.tpcp`), TP reduce-scatter; then ``after_s`` of
    compute (the router), in the same kernel span when nothing comes between (tp = cp = 1)."""
    lay, bwd = st.spec.layout, key[2] == "B"
    cp, merged = lay.cp, lay.tp == 1 and lay.cp == 1
    yield from _tp(st, rank, "ag", key)
    if cp == 1:
        yield from _compute(st, rank, time_s + (after_s if merged else 0.0))
    else:
        core_s = layer.core_bwd_s if bwd else layer.core_fwd_s
        yield from _compute(st, rank, time_s - core_s)
        size = st.plan.cp_kv_bytes * (2 if bwd else 1)  # backward: K/V and dK/dV
        for step in range(cp):
            if step < cp - 1:
                cp_send(st, rank, (*key, step), size)
            yield from _compute(st, rank, core_s / cp)
            if step < cp - 1:
                yield from _wait(st, rank, "cp_exposed", cp_arrival(st, (*key, step), rank))
    yield from _tp(st, rank, "rs", key)
    if after_s and not merged:
        yield from _compute(st, rank, after_s)


def _fusable(st: StepState, rank: int, layer: LayerPlan) -> bool:
    """Whether ``layer`` can run on ``rank`` as one timeout (:func:`_fused_moe`): a MoE layer
    with nothing inside it that another process could see or change (no TP / CP / ETP
    collectives, no TP-sharded FFN, one pass at a time) and all-to-alls whose arrival the
    state can compute without events (:meth:`StepState.a2a_arrival_s`: fast mode)."""
    lay = st.spec.layout
    return (st.analytic_a2a and layer.moe is not None and lay.tp == 1 and lay.cp == 1
            and layer.etp_bytes is None and not layer.ffn_fwd_s and not layer.ffn_bwd_s
            and st.ledger[rank] is st.time_s_row[rank])


def _fused_moe(st: StepState, rank: int, layer: LayerPlan, mb: int, backward: bool
               ) -> Generated:
    """The MoE layer of :func:`_layer_fwd` / :func:`_layer_bwd` as one timeout, for
    :func:`_fusable` layers: the same steps in the same order, each booked as its events
    would book it (spans are not recorded: the critical-path walk is full mode's)."""
    e, c = st.coords[rank]["ep"], layer.moe
    assert c is not None
    steps: tuple[tuple[str, float], ...] = (
        (("", layer.recompute_time_s(e)), ("combine_bwd", 0.0),
         ("", float(c.experts_bwd[e])), ("dispatch_bwd", 0.0), ("", float(c.attn_bwd[e])))
        if backward else
        (("", float(c.attn_fwd[e]) + float(c.router[e])), ("dispatch", 0.0),
         ("", float(c.experts_fwd[e])), ("combine", 0.0), ("", float(c.unpermute[e]))))
    row, slow, a2a = st.ledger[rank], float(st.slowdown[rank]), CATEGORIES.index("a2a_exposed")
    t0 = t = st.env.now
    for phase, time_s in steps:
        if phase:
            wait_s = max(st.a2a_arrival_s(rank, layer, mb, phase, t) - t, 0.0)
            row[a2a] += (t + wait_s) - t  # what the event path books: the clock's difference
            t += wait_s
        else:
            time_s *= slow
            row[0] += time_s
            t += time_s
    yield st.env.timeout(t - t0)


def _layer(st: StepState, rank: int, layer: LayerPlan, mb: int, backward: bool) -> Generated:
    """One layer's forward or backward pass on ``rank``: in closed form where fast mode can
    (a fusable MoE layer as one timeout; the TP / CP members' layer, booked by the state),
    else op by op (:func:`_layer_fwd`, :func:`_layer_bwd`)."""
    if _fusable(st, rank, layer):
        yield from _fused_moe(st, rank, layer, mb, backward)
    elif (fused := st.fused_layer(rank, layer, mb, backward)) is not None:
        yield fused
    else:
        yield from (_layer_bwd if backward else _layer_fwd)(st, rank, layer, mb)


def _layer_fwd(st: StepState, rank: int, layer: LayerPlan, mb: int) -> Generated:
    key = (layer.index, mb, "F")
    if layer.moe is None:
        yield from _attention(st, rank, layer, key, layer.dense_fwd_s - layer.ffn_fwd_s)
        yield from _tp_block(st, rank, (*key, "ffn"), layer.ffn_fwd_s)
        return
    e, c = st.coords[rank]["ep"], layer.moe
    yield from _attention(st, rank, layer, key, float(c.attn_fwd[e]), float(c.router[e]))
    yield from _a2a(st, rank, layer, mb, "dispatch")
    yield from _etp(st, rank, layer, mb, "dispatch")
    yield from _compute(st, rank, float(c.experts_fwd[e]))
    yield from _etp(st, rank, layer, mb, "combine")
    yield from _a2a(st, rank, layer, mb, "combine")
    yield from _compute(st, rank, float(c.unpermute[e]))
    if layer.ffn_fwd_s:  # shared experts, TP-sharded (tp > 1)
        yield from _tp_block(st, rank, (*key, "ffn"), layer.ffn_fwd_s)


def _layer_bwd(st: StepState, rank: int, layer: LayerPlan, mb: int) -> Generated:
    key = (layer.index, mb, "B")
    again_s = layer.recompute_time_s(st.coords[rank]["ep"])
    if again_s:
        yield from _compute(st, rank, again_s)
    if layer.moe is None:
        yield from _tp_block(st, rank, (*key, "ffn"), layer.ffn_bwd_s)
        yield from _attention(st, rank, layer, key, layer.dense_bwd_s - layer.ffn_bwd_s)
        return
    e, c = st.coords[rank]["ep"], layer.moe
    if layer.ffn_bwd_s:
        yield from _tp_block(st, rank, (*key, "ffn"), layer.ffn_bwd_s)
    yield from _a2a(st, rank, layer, mb, "combine_bwd")
    yield from _etp(st, rank, layer, mb, "combine_bwd")
    yield from _compute(st, rank, float(c.experts_bwd[e]))
    yield from _etp(st, rank, layer, mb, "dispatch_bwd")
    yield from _a2a(st, rank, layer, mb, "dispatch_bwd")
    yield from _attention(st, rank, layer, key, float(c.attn_bwd[e]))


def _run_pass(st: StepState, rank: int, p: Pass, defer_w: bool = False) -> Generated:
    """One pass of ``rank``; a B with ``defer_w`` computes the input gradient only."""
    vs = st.place.vstage(st.coords[rank]["pp"], p.chunk)
    layers = [st.plan.layers[i] for i in st.plan.chunk_layers[vs]]
    last = vs == st.place.n_virtual - 1
    st.enter_pass(p.kind, p.microbatch, vs)
    if p.kind == "W":
        yield from _weight_pass(st, rank, vs, layers, last)
        return
    box = pipeline_input(st, rank, p)
    if box is not None:
        yield from _wait(st, rank, "bubble", box)
    if p.kind == "F":
        for layer in layers:
            yield from _layer(st, rank, layer, p.microbatch, backward=False)
        if last:
            yield from _compute(st, rank, st.plan.head_fwd_s)
        else:
            send(st, rank, "F", p.microbatch, vs + 1, p.chunk)
        return
    if last:  # the loss: the head's backward starts it
        yield from _compute(st, rank, st.plan.head_bwd_s - (st.plan.head_wgrad_s if defer_w
                                                            else 0.0))
    st.b_count[(rank, vs)] = st.b_count.get((rank, vs), 0) + 1
    reduce = not defer_w and grads_done(st, rank, vs)
    if defer_w:
        layers = [st.plan.input_grad_layers[i] for i in st.plan.chunk_layers[vs]]
    for layer in reversed(layers):
        yield from _layer(st, rank, layer, p.microbatch, backward=True)
        if reduce:
            st.reduce_grads(rank, layer.index, *st.plan.layer_params[layer.index])
    if reduce:
        st.reduce_grads(rank, -1 - vs, st.plan.extra_dense[vs], 0)
    if vs > 0:
        send(st, rank, "B", p.microbatch, vs - 1, p.chunk)


def _weight_pass(st: StepState, rank: int, vs: int, layers: list[LayerPlan], last: bool
                 ) -> Generated:
    """The deferred weight gradients of a chunk (:mod:`moesim.step.wgrad`): compute only,
    layer by layer in backward order (LM head first on the last virtual stage); with
    ``dp_overlap`` each layer's reduce-scatter starts after its last W."""
    reduce = grads_done(st, rank, vs)
    if last:
        yield from _compute(st, rank, st.plan.head_wgrad_s)
    e = st.coords[rank]["ep"]
    for layer in reversed(layers):
        yield from _compute(st, rank, layer.wgrad_time_s(e))
        if reduce:
            st.reduce_grads(rank, layer.index, *st.plan.layer_params[layer.index])
    if reduce:
        st.reduce_grads(rank, -1 - vs, st.plan.extra_dense[vs], 0)


def _dp_tail(st: StepState, rank: int) -> Generated:
    lay, plan = st.spec.layout, st.plan
    dense, expert = st.held_params(rank)  # DualPipe: two stages
    if not st.spec.dp_overlap:
        st.reduce_grads(rank, -1, dense, expert)
    # dense: over the DP x CP group; a parameter held twice (DualPipe) is sharded over both
    # copies' groups, so each rank steps half of its two stages' shard
    shard = (dense / (lay.dp * lay.cp) + expert / lay.edp) / st.place.copies
    opt_s = float(memory_bound_time_s(plan.gpu, shard * OPTIMIZER_BYTES_PER_PARAM,
                                      float(st.slowdown[rank])))
    # FP8 precisions quantise the rank's weights once per step (moesim.hardware.precision)
    opt_s += float(cast_time_s(plan.gpu, dense + expert, st.spec.compute_dtype,
                               float(st.slowdown[rank])))
    sizes: list[tuple[str, float]] = [
        (kind, float(params * PARAM_BYTES)) for kind, params in (("dp_ag", dense),
                                                                 ("edp_ag", expert)) if params]
    st.begin_tail(rank, opt_s, sizes)
    yield from _wait(st, rank, "dp_exposed", st.env.all_of(st.pending[rank]))
    st.time_s[rank, CATEGORIES.index("optimizer")] += opt_s
    yield st.env.timeout(opt_s)
    gathers = [st.join_ring(rank, kind, -1, size_bytes) for kind, size_bytes in sizes]
    yield from _wait(st, rank, "dp_exposed", st.env.all_of(gathers))


def _inputs(st: StepState, rank: int, passes: tuple[Pass, ...]) -> Generated:
    """Wait for the pipeline inputs of an FB op's passes, as bubble (module docstring)."""
    for p in passes:
        box = pipeline_input(st, rank, p)
        if box is not None:
            yield from _wait(st, rank, "bubble", box)


def _overlapped(st: StepState, rank: int, passes: tuple[Pass, ...]) -> Generated:
    """Run ``passes`` concurrently on ``rank``; book compute, split the rest by the waits."""
    main, scratch = st.ledger[rank], np.zeros(len(CATEGORIES))
    st.ledger[rank] = scratch
    t0 = st.env.now
    yield st.env.all_of([st.env.process(_run_pass(st, rank, p)) for p in passes])
    st.ledger[rank] = main
    main[0] += scratch[0]
    idle_s, waits = st.env.now - t0 - scratch[0], scratch[1:]
    if waits.sum() > 0:
        main[1:] += idle_s * waits / waits.sum()
    else:
        main[CATEGORIES.index("bubble")] += idle_s


def rank_program(st: StepState, rank: int) -> Generated:
    """The whole step of ``rank``: its stage's ops, then the DP/optimizer tail. Each op's
    time less its waits for pipeline inputs is booked by op kind (``StepState.op_kind_s``)."""
    stage = st.coords[rank]["pp"]
    bubble = CATEGORIES.index("bubble")
    by_kind = st.op_kind_s.setdefault(rank, dict.fromkeys(("F", "B", "W", "FB"), 0.0))
    for op in st.ops[stage]:
        t0, idle0 = st.env.now, st.time_s[rank, bubble]
        if op.kind == "FB":
            yield from _inputs(st, rank, op.passes())
        if op.kind == "FB" and st.spec.fb_overlap:
            yield from _overlapped(st, rank, op.passes())
        else:
            for p in op.passes():
                yield from _run_pass(st, rank, p, op.defer_w)
        by_kind[op.kind] += st.env.now - t0 - (st.time_s[rank, bubble] - idle0)
    st.last_op_s[rank] = st.env.now
    yield from _dp_tail(st, rank)
    st.end_s[rank] = st.env.now
