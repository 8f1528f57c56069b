"""One layer's forward or backward pass on one rank, as the rank programs of
:mod:`moesim.step.program` run it, and the two primitives every pass is made of (a compute
span, a booked wait).

MoE layer forward: attn -> router -> dispatch a2a -> experts -> combine a2a -> unpermute (as
:mod:`moesim.workload.moe_stack`); dense layer: attention + FFN. Backward: the mirror image
with the gradients (combine_bwd a2a -> experts_bwd -> dispatch_bwd a2a -> attn_bwd), each layer
first running again the forward compute its activation recompute needs
(``LayerPlan.recompute_s``). TP / ETP collectives and CP ring-attention steps sit where the
layout puts them (:mod:`moesim.step.tpcp`).
"""

from __future__ import annotations

import simpy

from moesim.step.plan import LayerPlan
from moesim.step.state import CATEGORIES, Generated, StepState
from moesim.step.tpcp import cp_arrival, cp_send, tp_collective


def wait(st: StepState, rank: int, category: str, event: simpy.Event,
         op: object = None) -> Generated:
    """Wait for ``event``, booked on ``rank`` as ``category`` and recorded (``op``: what the
    critical-path walk reads as the waited-on thing; the event itself when None)."""
    t0 = st.env.now
    value = yield event
    st.ledger[rank][CATEGORIES.index(category)] += st.env.now - t0
    st.record(rank, t0, category, event if op is None else op, value)


def compute(st: StepState, rank: int, time_s: float) -> Generated:
    """``time_s`` of ``rank``'s compute (times its slowdown); inside an FB op, queued on the
    rank's GPU and slowed by the SMs the overlapped all-to-all holds."""
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
    yield from wait(st, rank, "a2a_exposed", a2a.received(local), a2a)


def _tp(st: StepState, rank: int, kind: str, key: tuple[object, ...]) -> Generated:
    """TP all-gather ("ag") or reduce-scatter ("rs") of ``key`` over ``rank``'s TP group."""
    if st.spec.layout.tp > 1:
        yield from wait(st, rank, "tp_exposed", tp_collective(st, rank, kind, key))


def _tp_block(st: StepState, rank: int, key: tuple[object, ...], time_s: float) -> Generated:
    """A TP-sharded block (dense FFN, shared experts): all-gather, compute, reduce-scatter."""
    yield from _tp(st, rank, "ag", key)
    yield from compute(st, rank, time_s)
    yield from _tp(st, rank, "rs", key)


def _etp(st: StepState, rank: int, layer: LayerPlan, mb: int, phase: str) -> Generated:
    """ETP all-gather of the tokens ``phase`` brought to the experts, or reduce-scatter of
    those it takes away (:mod:`moesim.step.tpcp`); nothing with etp = 1."""
    if layer.etp_bytes is None:
        return
    kind = "ag" if phase in ("dispatch", "combine_bwd") else "rs"
    size = float(layer.etp_bytes[phase][st.coords[rank]["ep"]])
    event = tp_collective(st, rank, kind, (layer.index, mb, phase), "etp", size)
    yield from wait(st, rank, "tp_exposed", event)


def _attention(st: StepState, rank: int, layer: LayerPlan, key: tuple[object, ...],
               time_s: float, after_s: float = 0.0) -> Generated:
    """Attention block ``key`` = (layer, mb, pass): TP all-gather, projections, the core as
    ``cp`` ring-attention steps (:mod:`moesim.step.tpcp`), TP reduce-scatter; then ``after_s`` of
    compute (the router), in the same kernel span when nothing comes between (tp = cp = 1)."""
    lay, bwd = st.spec.layout, key[2] == "B"
    cp, merged = lay.cp, lay.tp == 1 and lay.cp == 1
    yield from _tp(st, rank, "ag", key)
    if cp == 1:
        yield from compute(st, rank, time_s + (after_s if merged else 0.0))
    else:
        core_s = layer.core_bwd_s if bwd else layer.core_fwd_s
        yield from compute(st, rank, time_s - core_s)
        size = st.plan.cp_kv_bytes * (2 if bwd else 1)  # backward: K/V and dK/dV
        for step in range(cp):
            if step < cp - 1:
                cp_send(st, rank, (*key, step), size)
            yield from compute(st, rank, core_s / cp)
            if step < cp - 1:
                yield from wait(st, rank, "cp_exposed", cp_arrival(st, (*key, step), rank))
    yield from _tp(st, rank, "rs", key)
    if after_s and not merged:
        yield from compute(st, rank, after_s)


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


def layer_pass(st: StepState, rank: int, layer: LayerPlan, mb: int, backward: bool
               ) -> Generated:
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
    yield from compute(st, rank, float(c.experts_fwd[e]))
    yield from _etp(st, rank, layer, mb, "combine")
    yield from _a2a(st, rank, layer, mb, "combine")
    yield from compute(st, rank, float(c.unpermute[e]))
    if layer.ffn_fwd_s:  # shared experts, TP-sharded (tp > 1)
        yield from _tp_block(st, rank, (*key, "ffn"), layer.ffn_fwd_s)


def _layer_bwd(st: StepState, rank: int, layer: LayerPlan, mb: int) -> Generated:
    key = (layer.index, mb, "B")
    again_s = layer.recompute_time_s(st.coords[rank]["ep"])
    if again_s:
        yield from compute(st, rank, again_s)
    if layer.moe is None:
        yield from _tp_block(st, rank, (*key, "ffn"), layer.ffn_bwd_s)
        yield from _attention(st, rank, layer, key, layer.dense_bwd_s - layer.ffn_bwd_s)
        return
    e, c = st.coords[rank]["ep"], layer.moe
    if layer.ffn_bwd_s:
        yield from _tp_block(st, rank, (*key, "ffn"), layer.ffn_bwd_s)
    yield from _a2a(st, rank, layer, mb, "combine_bwd")
    yield from _etp(st, rank, layer, mb, "combine_bwd")
    yield from compute(st, rank, float(c.experts_bwd[e]))
    yield from _etp(st, rank, layer, mb, "dispatch_bwd")
    yield from _a2a(st, rank, layer, mb, "dispatch_bwd")
    yield from _attention(st, rank, layer, key, float(c.attn_bwd[e]))

