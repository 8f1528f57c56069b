"""Pipeline sends between stages, the inputs passes wait for, and when a chunk's weight
gradients are all computed.

A pass's output (activations forward, their gradients backward) goes as one point-to-point flow
to the rank that runs the next virtual stage for that micro-batch: the schedule's placement
(:mod:`moesim.schedule.placement`) says which stage that is; the peer has the sender's tp, cp and
dp coordinates.
"""

from __future__ import annotations

import simpy

from moesim.schedule.ops import Pass
from moesim.step.state import StepState


def peer(st: StepState, rank: int, stage: int) -> int:
    """The rank of pipeline stage ``stage`` in ``rank``'s pipeline (same tp, cp, dp
    coordinates: each TP/CP rank sends its own shard)."""
    lay, c = st.spec.layout, st.coords[rank]
    return lay.dense_rank(tp=c["tp"], cp=c["cp"], dp=c["dp"], pp=stage)


def send(st: StepState, rank: int, kind: str, mb: int, vstage: int, chunk: int) -> None:
    """Send the input of pass ``kind`` of ``mb`` on ``vstage`` from ``rank`` to its owner
    (the schedule's placement: who runs ``vstage`` for a micro-batch in ``chunk``)."""
    dst = peer(st, rank, st.place.owner(vstage, chunk)[0])
    box = st.mailbox(kind, mb, vstage, dst)
    sent = (rank, st.env.now, st.net.flows.n)  # sender, send time, id of the flow send starts
    gid, done = st.net.expect(1)  # p2p.send without its event of the arrival time

    def arrived(_: simpy.Event) -> None:
        box.succeed(sent)

    done.callbacks.append(arrived)
    st.net.start_one(rank, dst, st.plan.act_bytes, gid)


def pipeline_input(st: StepState, rank: int, p: Pass) -> simpy.Event | None:
    """The event of the input pass ``p`` of ``rank`` waits for (what :func:`send` delivers):
    none for a W, a forward on the first virtual stage or a backward on the last (the loss)."""
    vs = st.place.vstage(st.coords[rank]["pp"], p.chunk)
    if p.kind == "W" or vs == (0 if p.kind == "F" else st.place.n_virtual - 1):
        return None
    return st.mailbox(p.kind, p.microbatch, vs, rank)


def grads_done(st: StepState, rank: int, vs: int) -> bool:
    """Count one more pass of ``rank``'s chunk ``vs`` whose weight gradients it computes;
    whether it is the last (then, with ``dp_overlap``, its layers' reduce-scatters start as
    their gradients are ready)."""
    key = (rank, vs)
    st.w_count[key] = st.w_count.get(key, 0) + 1
    return st.spec.dp_overlap and st.w_count[key] == st.spec.microbatches // st.place.copies
