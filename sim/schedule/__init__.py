"""Pipeline schedules (1F1B, interleaved, DualPipe-style) as data, a registry, an executor."""

from __future__ import annotations

from moesim.schedule.deps import dependencies, pass_dependencies, schedule_shape
from moesim.schedule.execute import OpSpan, ScheduleRun, op_time_s, simulate_schedule
from moesim.schedule.ops import Op, Pass, ScheduleOps, StageOps, bwd, fwd, fwd_bwd
from moesim.schedule.registry import (
    DUALPIPE,
    INTERLEAVED,
    ONE_F_ONE_B,
    PipelineSchedule,
    build_schedule,
    get_schedule,
    register_schedule,
    schedule_names,
)

__all__ = [
    "DUALPIPE",
    "INTERLEAVED",
    "ONE_F_ONE_B",
    "Op",
    "OpSpan",
    "Pass",
    "PipelineSchedule",
    "ScheduleOps",
    "ScheduleRun",
    "StageOps",
    "build_schedule",
    "bwd",
    "dependencies",
    "fwd",
    "fwd_bwd",
    "get_schedule",
    "op_time_s",
    "pass_dependencies",
    "register_schedule",
    "schedule_names",
    "schedule_shape",
    "simulate_schedule",
]
