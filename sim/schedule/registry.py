"""Pipeline schedules as a registry by name: the swappable part a scenario names."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from moesim.errors import ConfigError
from moesim.registry import Registry
from moesim.schedule import builders, dualpipe
from moesim.schedule.ops import ScheduleOps, StageCommits
from moesim.schedule.placement import Placement, PlacementKind

BuildFn = Callable[[int, int, int], ScheduleOps]
"""``(pp, microbatches, virtual_stages) -> ops per stage``."""

CommitsFn = Callable[[int, int, int], tuple[StageCommits, ...]]
"""``(pp, microbatches, virtual_stages) -> commits per stage`` (batched point-to-point)."""

CheckFn = Callable[[str, int, int, int], None]
"""``(name, pp, microbatches, virtual_stages)``; raises ConfigError when the schedule cannot run."""


@dataclass(frozen=True)
class PipelineSchedule:
    """A named schedule: its builder, the check its inputs must pass, and where its chunks run
    (:mod:`moesim.schedule.placement`)."""

    name: str
    build: BuildFn
    check: CheckFn
    description: str = ""
    placement_kind: PlacementKind = "megatron"
    commits: CommitsFn | None = None  # the source batches its sends and receives per op
    # (DualPipe, :mod:`moesim.schedule.dualpipe`); None: each output leaves when its pass ends

    def placement(self, pp: int, virtual_stages: int = 1) -> Placement:
        """The chunk -> stage map for ``pp`` stages of ``virtual_stages`` layout chunks."""
        if self.placement_kind == "mirrored":
            return Placement("mirrored", pp, 2)
        return Placement(self.placement_kind, pp, virtual_stages)

    def ops(self, pp: int, microbatches: int, virtual_stages: int = 1) -> ScheduleOps:
        """The ordered ops of every stage (ConfigError on inputs it cannot schedule)."""
        for field, value in (
            ("schedule.pp", pp),
            ("schedule.microbatches", microbatches),
            ("schedule.virtual_stages", virtual_stages),
        ):
            if value < 1:
                raise ConfigError(field, f"must be a positive integer, got {value}")
        self.check(self.name, pp, microbatches, virtual_stages)
        return self.build(pp, microbatches, virtual_stages)


_SCHEDULES = Registry[PipelineSchedule]("schedule", "schedule")


def register_schedule(schedule: PipelineSchedule) -> PipelineSchedule:
    """Add ``schedule`` to the registry; a duplicate name is an error."""
    return _SCHEDULES.add(schedule.name, schedule)


def schedule_names() -> tuple[str, ...]:
    """Registered schedule names, in registration order."""
    return _SCHEDULES.names()


def get_schedule(name: str) -> PipelineSchedule:
    """The schedule registered as ``name`` (ConfigError listing the names otherwise)."""
    return _SCHEDULES.lookup(name)


def build_schedule(name: str, pp: int, microbatches: int, virtual_stages: int = 1) -> ScheduleOps:
    """Ops per stage of the schedule named ``name``."""
    return get_schedule(name).ops(pp, microbatches, virtual_stages)


ONE_F_ONE_B = register_schedule(
    PipelineSchedule("1f1b", builders.one_f_one_b, builders.check_one_chunk, "1F1B")
)
INTERLEAVED = register_schedule(
    PipelineSchedule(
        "interleaved", builders.interleaved, builders.check_interleaved, "interleaved 1F1B"
    )
)
DUALPIPE = register_schedule(
    PipelineSchedule(
        "dualpipe", dualpipe.dualpipe, builders.check_dualpipe,
        "DualPipe: bidirectional, two mirrored chunks per rank, F/B/W split", "mirrored",
        dualpipe.dualpipe_commits,
    )
)
