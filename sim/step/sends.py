"""Pipeline sends between stages, the inputs passes wait for, and when a chunk's weight
gradients are all computed.

A pass's output (activations forward, their gradients backward) goes as one point-to-point flow
to the rank that runs the next virtual stage for that micro-batch: the schedule's placement
(:mod:`moesim.schedule.placement`) says which stage that is; the peer has the sender's tp, cp and
dp coordinates.

Where the schedule batches its transfers (``StepState.commits``: DualPipe,
:mod:`moesim.schedule.dualpipe`), a pass's output does not leave when the pass ends: before
each op the rank posts that op's commit (the sends queued since its last commit, the receives
the source posts there) and waits until every one of them has completed, as booked bubble
(:func:`commit`). A transfer is one flow, started when both its sender and its receiver have
posted it (NCCL's two-sided send / receive); both sides' commits wait for its arrival (the
sender's bytes have left a path latency before: microseconds, not modelled).
"""

from __future__ import annotations

import simpy

from moesim.schedule.ops import Pass, Post
from moesim.step.state import StepState


def peer(st: StepState, rank: int, stage: int) -> int:
    """The rank of pipeline stage ``stage`` in ``rank``'s pipeline (same tp, cp, dp
    coordinates: each TP/CP rank sends its own shard)."""
    lay, c = st.spec.layout, st.coords[rank]
    return lay.dense_rank(tp=c["tp"], cp=c["cp"], dp=c["dp"], pp=stage)


def send(st: StepState, rank: int, kind: str, mb: int, vstage: int, chunk: int) -> None:
    """Send the input of pass ``kind`` of ``mb`` on ``vstage`` from ``rank`` to its owner
    (the schedule's placement: who runs ``vstage`` for a micro-batch in ``chunk``) now;
    nothing where the schedule batches its sends (:func:`commit` posts them)."""
    if st.commits is None:
        _start(st, rank, peer(st, rank, st.place.owner(vstage, chunk)[0]), kind, mb, vstage)


def _start(st: StepState, rank: int, dst: int, kind: str, mb: int, vstage: int) -> None:
    """Start the flow of ``rank``'s send to ``dst`` of the input of pass ``kind`` of ``mb`` on
    ``vstage``; its mailbox fires on arrival with (sender, start time, flow id)."""
    box = st.mailbox(kind, mb, vstage, dst)
    sent = (rank, st.env.now, st.net.flows.n)  # sender, send time, id of the flow send starts
    gid, done = st.net.expect(1)  # p2p.send without its event of the arrival time

    def arrived(_: simpy.Event) -> None:
        box.succeed(sent)

    done.callbacks.append(arrived)
    st.net.start_one(rank, dst, st.plan.act_bytes, gid)


def pipeline_input(st: StepState, rank: int, p: Pass) -> simpy.Event | None:
    """The event of the input pass ``p`` of ``rank`` waits for (what :func:`send` delivers):
    none for a W, a forward on the first virtual stage or a backward on the last (the loss),
    or where the schedule batches its transfers (the op's :func:`commit` waited for it)."""
    vs = st.place.vstage(st.coords[rank]["pp"], p.chunk)
    if (st.commits is not None or p.kind == "W"
            or vs == (0 if p.kind == "F" else st.place.n_virtual - 1)):
        return None
    return st.mailbox(p.kind, p.microbatch, vs, rank)


def commit(st: StepState, rank: int, k: int) -> list[simpy.Event]:
    """Post ``rank``'s commit ``k`` (before its op ``k``; ``k`` = its op count: the final
    one) and return the arrival events of its transfers, all of which it waits for; none
    where the schedule does not batch (module docstring)."""
    if st.commits is None:
        return []
    return [_post(st, rank, post) for post in st.commits[st.coords[rank]["pp"]][k]]


def _post(st: StepState, rank: int, post: Post) -> simpy.Event:
    """``rank``'s side of one transfer: the flow starts when the other side has posted too."""
    p, fwd = post.p, post.p.kind == "F"
    vs = st.place.vstage(st.coords[rank]["pp"], p.chunk)
    if post.send:  # p's output, to the next virtual stage of its direction
        to = vs + 1 if fwd else vs - 1
        src, dst = rank, peer(st, rank, st.place.owner(to, p.chunk)[0])
    else:  # p's input, from the previous one
        to = vs
        src, dst = peer(st, rank, st.place.owner(vs - 1 if fwd else vs + 1, p.chunk)[0]), rank
    key = (p.kind, p.microbatch, to, dst)
    sides = st.posted[key] = st.posted.get(key, 0) + 1
    if sides == 2:
        _start(st, src, dst, p.kind, p.microbatch, to)
    return st.mailbox(p.kind, p.microbatch, to, dst)


def grads_done(st: StepState, rank: int, vs: int) -> bool:
    """Count one more pass of ``rank``'s chunk ``vs`` whose weight gradients it computes;
    whether it is the last (then, with ``dp_overlap``, its layers' reduce-scatters start as
    their gradients are ready)."""
    key = (rank, vs)
    st.w_count[key] = st.w_count.get(key, 0) + 1
    return st.spec.dp_overlap and st.w_count[key] == st.spec.microbatches // st.place.copies
