"""A small SimPy executor for schedules: constant op times and a constant point-to-point delay.

A test oracle (tests/test_schedules*.py check the schedule builders with it); the simulator runs
schedules op by op on the fabric (:mod:`moesim.step.program`), not here.

Each stage is a SimPy process that runs its ops in order; an op starts when the
stage is free and every pass it contains has its dependencies met (see
:mod:`moesim.schedule.deps`). A result that crosses stages arrives ``p2p_time_s``
after the producing op ends. An "FB" op lasts ``overlap_fb_time_s`` (e.g.
``max(compute_f + compute_b, a2a_f + a2a_b)`` when one micro-batch's compute hides
the other's all-to-all), or ``f_time_s + b_time_s`` when that is None. An FB op
starts only when both its passes' inputs are there; its forward result is released
after the forward's share ``f / (f + b)`` of the op, its backward result at the end
(a simplification: the real interleaving of the two passes is finer). ``b_time_s`` is a whole
backward (input and weight gradient); a "B" op with ``defer_w`` lasts ``b - w`` and its "W"
op ``w_time_s``.

Example::

    >>> import simpy
    >>> from moesim.schedule import build_schedule
    >>> run = simulate_schedule(simpy.Environment(), build_schedule("1f1b", 4, 8), 1.0, 2.0)
    >>> run.makespan_s  # (m + p - 1) * (f + b)
    33.0
"""

from __future__ import annotations

from collections.abc import Generator, Mapping
from dataclasses import dataclass
from types import MappingProxyType

import simpy

from moesim.errors import ConfigError
from moesim.schedule.deps import dependencies
from moesim.schedule.ops import Op, Pass, ScheduleOps
from moesim.schedule.placement import Placement

Key = tuple[int, Pass]
"""(stage, pass)."""


@dataclass(frozen=True)
class OpSpan:
    """When one op of one stage ran."""

    op: Op
    start_s: float
    end_s: float


@dataclass(frozen=True)
class ScheduleRun:
    """Per-stage spans of every op, when each pass's result was ready, and the makespan.

    The makespan runs from the environment's time at the call to the last op's end.
    An FB op's forward result is ready before the op ends (see the module docstring).
    """

    spans: tuple[tuple[OpSpan, ...], ...]
    makespan_s: float
    pass_end_s: Mapping[Key, float]

    def busy_s(self, stage: int) -> float:
        """Time ``stage`` spent running ops."""
        return sum(span.end_s - span.start_s for span in self.spans[stage])

    def bubble_fraction(self) -> float:
        """Idle share of all stages over the makespan: 1 - sum(busy) / (pp * makespan)."""
        if self.makespan_s == 0:
            return 0.0
        busy_s = sum(self.busy_s(s) for s in range(len(self.spans)))
        return 1.0 - busy_s / (len(self.spans) * self.makespan_s)


def op_time_s(op: Op, f_time_s: float, b_time_s: float, overlap_fb_time_s: float | None,
              w_time_s: float = 0.0) -> float:
    """Duration of ``op`` under constant per-pass times."""
    if op.kind == "F":
        return f_time_s
    if op.kind == "B":
        return b_time_s - (w_time_s if op.defer_w else 0.0)
    if op.kind == "W":
        return w_time_s
    return f_time_s + b_time_s if overlap_fb_time_s is None else overlap_fb_time_s


def simulate_schedule(
    env: simpy.Environment,
    ops_by_stage: ScheduleOps,
    f_time_s: float,
    b_time_s: float,
    p2p_time_s: float = 0.0,
    overlap_fb_time_s: float | None = None,
    w_time_s: float = 0.0,
    place: Placement | None = None,
) -> ScheduleRun:
    """Run ``ops_by_stage`` on ``env`` to completion; ConfigError if it deadlocks."""
    for field, value in (
        ("f_time_s", f_time_s),
        ("b_time_s", b_time_s),
        ("p2p_time_s", p2p_time_s),
        ("overlap_fb_time_s", overlap_fb_time_s or 0.0),
        ("w_time_s", w_time_s),
    ):
        if value < 0:
            raise ConfigError(f"schedule.{field}", f"must be >= 0, got {value}")
    if w_time_s > b_time_s:
        raise ConfigError("schedule.w_time_s", f"must be <= b_time_s, got {w_time_s}")
    deps = dependencies(ops_by_stage, place)
    missing = sorted({d for ds in deps.values() for d in ds if d not in deps})
    if missing:
        raise ConfigError("schedule", f"passes needed but never scheduled: {missing[:3]}")
    done = {key: env.event() for key in deps}
    end_s: dict[Key, float] = {}
    spans: list[list[OpSpan]] = [[] for _ in ops_by_stage]
    start_s = env.now

    def pass_times_s(op: Op) -> tuple[float, ...]:
        if op.kind != "FB":
            return (op_time_s(op, f_time_s, b_time_s, overlap_fb_time_s, w_time_s),)
        total_s = op_time_s(op, f_time_s, b_time_s, overlap_fb_time_s)
        f_part_s = total_s * f_time_s / (f_time_s + b_time_s) if total_s > 0 else 0.0
        return (f_part_s, total_s - f_part_s)

    def ready_s(stage: int, op: Op) -> float:
        times = [
            end_s[d] + (p2p_time_s if d[0] != stage else 0.0)
            for p in op.passes()
            for d in deps[(stage, p)]
        ]
        return max(times, default=env.now)

    def stage_proc(stage: int) -> Generator[simpy.Event, object, None]:
        for op in ops_by_stage[stage]:
            yield env.all_of([done[d] for p in op.passes() for d in deps[(stage, p)]])
            wait_s = ready_s(stage, op) - env.now
            if wait_s > 0:
                yield env.timeout(wait_s)
            begin_s = env.now
            for p, pass_s in zip(op.passes(), pass_times_s(op), strict=True):
                yield env.timeout(pass_s)
                end_s[(stage, p)] = env.now
                done[(stage, p)].succeed()
            spans[stage].append(OpSpan(op, begin_s, env.now))

    procs = [env.process(stage_proc(s)) for s in range(len(ops_by_stage))]
    try:
        env.run(until=env.all_of(procs))
    except RuntimeError as err:
        stuck = [s for s, proc in enumerate(procs) if proc.is_alive]
        raise ConfigError("schedule", f"deadlock: stages {stuck} never finish") from err
    return ScheduleRun(tuple(tuple(s) for s in spans), env.now - start_s, MappingProxyType(end_s))
