"""The result of a run: an immutable record that serialises to JSON.

Other tools read these keys; keep them: ``step_time_s``, ``tokens_per_s``,
``seed``, ``dropped_tokens``, ``ranks`` [{rank, compute_s, comm_s, idle_s}],
``links`` [{id, tier, bytes, busy_s, peak_util}], ``stragglers`` [{rank,
cause, excess_s, detail}] (cause: expert_imbalance | link_congestion |
slow_gpu).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
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
    dropped_tokens: int
    balanced_step_time_s: float
    uncongested_step_time_s: float
    breakdown_s: dict[str, float]
    imbalance: dict[str, float]
    ranks: list[RankStat]
    links: list[LinkStat]
    stragglers: list[Straggler]
    collectives: list[CollectiveStat]
    engine: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent, sort_keys=False)
