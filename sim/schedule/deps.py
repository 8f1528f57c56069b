"""What each pass waits for: the pipeline's data dependencies.

Forward of micro-batch ``mb`` through chunk ``c`` on stage ``s`` needs the same
forward on stage ``s - 1``; on stage 0 it needs chunk ``c - 1`` on the last
stage (interleaved wrap-around), and nothing for chunk 0. Backward needs the
stage's own forward of that (micro-batch, chunk) and the same backward on stage
``s + 1``; on the last stage, chunk ``c + 1`` on stage 0 (nothing for the last
chunk, where the loss is).
"""

from __future__ import annotations

from moesim.schedule.ops import Pass, ScheduleOps

Dep = tuple[int, Pass]
"""A (stage, pass) that must finish first."""


def pass_dependencies(stage: int, p: Pass, pp: int, v: int) -> tuple[Dep, ...]:
    """The (stage, pass) pairs that ``p`` on ``stage`` waits for."""
    if p.kind == "F":
        if stage > 0:
            return ((stage - 1, p),)
        if p.chunk > 0:
            return ((pp - 1, Pass("F", p.microbatch, p.chunk - 1)),)
        return ()
    own = (stage, Pass("F", p.microbatch, p.chunk))
    if stage < pp - 1:
        return (own, (stage + 1, p))
    if p.chunk < v - 1:
        return (own, (0, Pass("B", p.microbatch, p.chunk + 1)))
    return (own,)


def schedule_shape(ops_by_stage: ScheduleOps) -> tuple[int, int]:
    """(pp, v) of a schedule: its number of stages and chunks per stage."""
    chunks = [p.chunk for ops in ops_by_stage for op in ops for p in op.passes()]
    return len(ops_by_stage), max(chunks, default=0) + 1


def dependencies(ops_by_stage: ScheduleOps) -> dict[Dep, tuple[Dep, ...]]:
    """Every (stage, pass) of the schedule mapped to the (stage, pass) pairs it waits for."""
    pp, v = schedule_shape(ops_by_stage)
    return {
        (s, p): pass_dependencies(s, p, pp, v)
        for s, ops in enumerate(ops_by_stage)
        for op in ops
        for p in op.passes()
    }
