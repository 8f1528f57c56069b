"""What each pass waits for: the pipeline's data dependencies.

With a :class:`~moesim.schedule.placement.Placement` (Megatron's by default): forward of
micro-batch ``mb`` in chunk ``c`` on stage ``s`` runs virtual stage ``vs``; it needs the
forward of ``vs - 1`` from whichever (stage, chunk) runs it (nothing for ``vs == 0``).
Backward needs the stage's own forward of that (micro-batch, chunk) and the backward of
``vs + 1`` (nothing on the last virtual stage, where the loss is). Megatron: stage 0's chunk
``c`` waits for chunk ``c - 1`` on the last stage (interleaved wrap-around). A deferred weight
gradient ("W") needs the stage's own backward of the same (micro-batch, chunk).
"""

from __future__ import annotations

from moesim.schedule.ops import Pass, ScheduleOps
from moesim.schedule.placement import Placement

Dep = tuple[int, Pass]
"""A (stage, pass) that must finish first."""


def pass_dependencies(stage: int, p: Pass, place: Placement) -> tuple[Dep, ...]:
    """The (stage, pass) pairs that ``p`` on ``stage`` waits for."""
    if p.kind == "W":
        return ((stage, Pass("B", p.microbatch, p.chunk)),)
    vs = place.vstage(stage, p.chunk)
    if p.kind == "F":
        if vs == 0:
            return ()
        s, c = place.owner(vs - 1, p.chunk)
        return ((s, Pass("F", p.microbatch, c)),)
    own = (stage, Pass("F", p.microbatch, p.chunk))
    if vs == place.n_virtual - 1:
        return (own,)
    s, c = place.owner(vs + 1, p.chunk)
    return (own, (s, Pass("B", p.microbatch, c)))


def schedule_shape(ops_by_stage: ScheduleOps) -> tuple[int, int]:
    """(pp, v) of a schedule: its number of stages and chunks per stage."""
    chunks = [p.chunk for ops in ops_by_stage for op in ops for p in op.passes()]
    return len(ops_by_stage), max(chunks, default=0) + 1


def dependencies(ops_by_stage: ScheduleOps, place: Placement | None = None
                 ) -> dict[Dep, tuple[Dep, ...]]:
    """Every (stage, pass) of the schedule mapped to the (stage, pass) pairs it waits for
    (``place``: Megatron's placement of the schedule's shape unless given)."""
    if place is None:
        place = Placement("megatron", *schedule_shape(ops_by_stage))
    return {
        (s, p): pass_dependencies(s, p, place)
        for s, ops in enumerate(ops_by_stage)
        for op in ops
        for p in op.passes()
    }
