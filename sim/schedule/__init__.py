"""Pipeline schedules (1F1B, interleaved, DualPipe) as data, and a registry of them.

The step runs them op by op on the fabric (:mod:`moesim.step.program`).
"""

from __future__ import annotations

from moesim.schedule.deps import dependencies, pass_dependencies, schedule_shape
from moesim.schedule.ops import Op, Pass, ScheduleOps, StageOps, bwd, fwd, fwd_bwd, wgt
from moesim.schedule.placement import Placement
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
    "Pass",
    "PipelineSchedule",
    "Placement",
    "ScheduleOps",
    "StageOps",
    "build_schedule",
    "bwd",
    "dependencies",
    "fwd",
    "fwd_bwd",
    "get_schedule",
    "pass_dependencies",
    "register_schedule",
    "schedule_names",
    "schedule_shape",
    "wgt",
]
