"""Every rank of the layout as one SimPy process walking its stage's schedule ops.

Per pass (see :mod:`moesim.schedule` for the orders):

* F of (micro-batch, chunk): wait for the activations from the previous virtual stage
  (a point-to-point flow from the rank with the same dp coordinate), run the chunk's layers
  forward (:mod:`moesim.step.layer_ops`), send the activations on. The last virtual stage
  also runs the LM head.
* B: the mirror image with the gradients, layers in reverse order, each first running again
  the forward compute its activation recompute needs (``StepSpec.recompute``: the memory
  plan's choice by default).
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

from moesim.hardware import cast_time_s, memory_bound_time_s
from moesim.schedule.ops import Pass
from moesim.step.layer_ops import compute, layer_pass, wait
from moesim.step.plan import LayerPlan
from moesim.step.sends import commit, grads_done, pipeline_input, send
from moesim.step.state import (
    CATEGORIES,
    OPTIMIZER_BYTES_PER_PARAM,
    PARAM_BYTES,
    Generated,
    StepState,
)


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
        yield from wait(st, rank, "bubble", box)
    if p.kind == "F":
        for layer in layers:
            yield from layer_pass(st, rank, layer, p.microbatch, backward=False)
        if last:
            yield from compute(st, rank, st.plan.head_fwd_s)
        else:
            send(st, rank, "F", p.microbatch, vs + 1, p.chunk)
        return
    if last:  # the loss: the head's backward starts it
        yield from compute(st, rank, st.plan.head_bwd_s - (st.plan.head_wgrad_s if defer_w
                                                            else 0.0))
    st.b_count[(rank, vs)] = st.b_count.get((rank, vs), 0) + 1
    reduce = not defer_w and grads_done(st, rank, vs)
    if defer_w:
        layers = [st.plan.input_grad_layers[i] for i in st.plan.chunk_layers[vs]]
    for layer in reversed(layers):
        yield from layer_pass(st, rank, layer, p.microbatch, backward=True)
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
        yield from compute(st, rank, st.plan.head_wgrad_s)
    e = st.coords[rank]["ep"]
    for layer in reversed(layers):
        yield from compute(st, rank, layer.wgrad_time_s(e))
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
    yield from wait(st, rank, "dp_exposed", st.env.all_of(st.pending[rank]))
    st.time_s[rank, CATEGORIES.index("optimizer")] += opt_s
    yield st.env.timeout(opt_s)
    gathers = [st.join_ring(rank, kind, -1, size_bytes) for kind, size_bytes in sizes]
    yield from wait(st, rank, "dp_exposed", st.env.all_of(gathers))


def _inputs(st: StepState, rank: int, passes: tuple[Pass, ...]) -> Generated:
    """Wait for the pipeline inputs of an FB op's passes, as bubble (module docstring)."""
    for p in passes:
        box = pipeline_input(st, rank, p)
        if box is not None:
            yield from wait(st, rank, "bubble", box)


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
    ops = st.ops[stage]
    for k, op in enumerate(ops):
        t0, idle0 = st.env.now, st.time_s[rank, bubble]
        for arrival in commit(st, rank, k):  # batched transfers (DualPipe): moesim.step.sends
            yield from wait(st, rank, "bubble", arrival)
        if op.kind == "FB":
            yield from _inputs(st, rank, op.passes())
        if op.kind == "FB" and st.spec.fb_overlap:
            yield from _overlapped(st, rank, op.passes())
        else:
            for p in op.passes():
                yield from _run_pass(st, rank, p, op.defer_w)
        by_kind[op.kind] += st.env.now - t0 - (st.time_s[rank, bubble] - idle0)
    for arrival in commit(st, rank, len(ops)):
        yield from wait(st, rank, "bubble", arrival)
    st.last_op_s[rank] = st.env.now
    yield from _dp_tail(st, rank)
    st.end_s[rank] = st.env.now
