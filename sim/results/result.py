"""The result of a run, in every mode: one immutable record that serialises to JSON.

Other tools read these keys; keep them. Every record: ``scenario``, ``mode`` (full | fast |
group), ``seed``, ``step_time_s``, ``tokens_per_s``, ``breakdown_s``, ``engine``, ``setting``
(what ran: model, GPU, fabric, layout, schedule, batch). A key that the mode does not produce
is null (or empty).

Group mode (one EP group's layers and its counterfactuals): ``dropped_tokens``,
``balanced_step_time_s``, ``uncongested_step_time_s``, ``imbalance``, ``ranks`` [{rank,
compute_s, comm_s, idle_s}], ``links`` [{id, tier, bytes, busy_s, peak_util}], ``stragglers``
[{rank, cause, excess_s, detail}] (cause: expert_imbalance | link_congestion | slow_gpu),
``collectives``.

Full and fast modes (the whole step): ``mfu``, ``tflops_per_gpu``, ``last_rank``,
``stage_makespan_s``, and in full mode ``critical_path`` (:mod:`moesim.results.critical_path`).

``evidence`` (not in :meth:`Result.to_dict`: it is bulky; :mod:`moesim.results.run_file` saves
it) is what attribution and the critical path were read from: a
:class:`moesim.results.group_record.GroupEvidence` in group mode, a
:class:`moesim.results.walk_record.WalkRecord` in full mode, None in fast mode. ``timeline``
(group mode, when asked: :class:`moesim.results.group_timeline.GroupTimeline`) is what the
Chrome trace and the saved run's timeline add to it.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, replace
from typing import Any

CAUSES = ("expert_imbalance", "link_congestion", "slow_gpu")


@dataclass(frozen=True)
class RankStat:
    rank: int
    gpu: str
    compute_s: float
    comm_s: float
    idle_s: float
    expert_load: int  # token copies its experts processed over the replayed layers


@dataclass(frozen=True)
class LinkStat:
    id: str
    tier: str
    bytes: float
    busy_s: float
    peak_util: float
    mean_util: float
    peak_flows: int


@dataclass(frozen=True)
class Straggler:
    rank: int
    cause: str
    excess_s: float
    detail: str
    link: str | None = None
    phases: int = 1  # how many phases this cause slowed


@dataclass(frozen=True)
class CollectiveStat:
    """One all-to-all: who finished last, why, and the excess over the counterfactuals."""

    phase: str
    layer: int
    time_s: float
    last_rank: int
    cause: str
    excess_s: float
    detail: str


@dataclass(frozen=True)
class Result:
    scenario: str
    seed: int
    step_time_s: float
    tokens_per_s: float
    breakdown_s: dict[str, float]
    mode: str = "group"
    dropped_tokens: int | None = None
    balanced_step_time_s: float | None = None
    uncongested_step_time_s: float | None = None
    imbalance: dict[str, float] = field(default_factory=dict)
    ranks: list[RankStat] = field(default_factory=list)
    links: list[LinkStat] = field(default_factory=list)
    stragglers: list[Straggler] = field(default_factory=list)
    collectives: list[CollectiveStat] = field(default_factory=list)
    mfu: float | None = None
    tflops_per_gpu: float | None = None
    last_rank: int | None = None
    stage_makespan_s: list[float] = field(default_factory=list)
    critical_path: dict[str, Any] | None = None
    engine: dict[str, Any] = field(default_factory=dict)
    setting: dict[str, Any] = field(default_factory=dict)
    evidence: Any = field(default=None, compare=False, repr=False)  # module docstring
    timeline: Any = field(default=None, compare=False, repr=False)

    def to_dict(self) -> dict[str, Any]:
        """The summary keys in plain types (``evidence`` and ``timeline`` left out)."""
        out = asdict(replace(self, evidence=None, timeline=None))
        del out["evidence"], out["timeline"]
        return out

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent, sort_keys=False)
