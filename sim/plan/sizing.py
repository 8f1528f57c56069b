"""Choose the GPU count: the fewest whole scalable units that meet the goal, by estimate.

A goal is ``tokens`` in ``days`` (or a ``gpu_budget``, which is then the count, rounded down
to whole hosts). Counts are whole rail scalable units (:data:`SU_GPUS`: 32 HGX hosts, the
unit a rail fabric grows by). The search, on the estimate (each point enumerates and
estimates every layout on the fabric built for that count, a few seconds):

1. start from the count that would train in time at :data:`START_MFU` (an assumption that
   only seeds the search), doubling while no layout fits in memory;
2. scale by the estimated days over the target (data parallelism scales throughput about
   linearly), then step one unit at a time: up while the estimate misses the target, down
   while one unit fewer still meets it, at most :data:`MAX_POINTS` counts in all.

The count is chosen on the estimate; the design then simulates it, and the report says
when the simulated days miss the target (the estimate only prunes).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

from moesim.hardware import GpuSpec
from moesim.model import ModelConfig, flops_per_token
from moesim.plan.cluster import HGX_GPUS_PER_HOST, HOSTS_PER_SU, check_gpus, max_rail_gpus
from moesim.plan.prepare import Prepared, prepare
from moesim.plan.spec import DesignSpec

SU_GPUS = HOSTS_PER_SU * HGX_GPUS_PER_HOST
START_MFU = 0.4  # assumption, seeds the search only
MAX_POINTS = 6
DAY_S = 86400.0


@dataclass
class Sizing:
    """The count chosen, why, and the counts tried with their estimated days."""

    gpus: int
    reason: str
    prepared: Prepared
    tried: dict[int, float | None] = field(default_factory=dict)  # gpus -> est. days

    def to_dict(self) -> dict[str, object]:
        return {"gpus": self.gpus, "reason": self.reason,
                "tried": [{"gpus": g, "estimated_days": d} for g, d in sorted(self.tried.items())]}


def estimated_days(spec: DesignSpec, prep: Prepared) -> float | None:
    """Days to train ``spec.tokens`` with the best layout by estimate (None: none fits)."""
    if not prep.ranked:
        return None
    return spec.tokens * prep.ranked[0].est_per_token_s(spec.seq_len) / DAY_S


def _round_su(gpus: float) -> int:
    return int(min(max_rail_gpus(), max(SU_GPUS, math.ceil(gpus / SU_GPUS) * SU_GPUS)))


def size_cluster(spec: DesignSpec, model: ModelConfig, gpu: GpuSpec,
                 say: Callable[[str], None]) -> Sizing:
    """The count for ``spec``'s goal (module docstring)."""
    if spec.gpu_budget is not None:
        gpus = spec.gpu_budget - spec.gpu_budget % HGX_GPUS_PER_HOST
        check_gpus(gpus)
        prep = prepare(spec, model, gpu, gpus)
        return Sizing(gpus, f"the GPU budget ({spec.gpu_budget}, whole 8-GPU hosts)", prep,
                      {gpus: estimated_days(spec, prep)})
    tried: dict[int, float | None] = {}
    preps: dict[int, Prepared] = {}

    def days_at(n: int) -> float | None:
        if n not in preps:
            preps[n] = prepare(spec, model, gpu, n)
            tried[n] = estimated_days(spec, preps[n])
            say(f"  {n} GPUs: " + (f"{tried[n]:.1f} days by estimate" if tried[n] is not None
                                   else "no layout fits"))
        return tried[n]

    flops = 3 * flops_per_token(model, spec.seq_len).total * spec.tokens
    n = _round_su(flops / (spec.days * DAY_S * START_MFU * gpu.peak_tflops("bf16") * 1e12))
    while days_at(n) is None and n < max_rail_gpus() and len(tried) < MAX_POINTS:
        n = _round_su(2 * n)
    d = days_at(n)
    if d is None:
        return Sizing(n, "no count tried fits the model in memory", preps[n], tried)
    n = _round_su(n * d / spec.days)
    while len(tried) < MAX_POINTS:
        d = days_at(n)
        if d is not None and d <= spec.days:
            lower = n - SU_GPUS
            if lower < SU_GPUS or (lower in tried and not _meets(tried[lower], spec.days)):
                break
            if lower not in tried and len(tried) >= MAX_POINTS:
                break
            if _meets(days_at(lower), spec.days):
                n = lower
                continue
            break
        if n >= max_rail_gpus():
            break
        n += SU_GPUS
    meets = _meets(tried.get(n), spec.days)
    reason = (f"the fewest whole scalable units ({SU_GPUS} GPUs each) whose best layout "
              f"trains {spec.tokens / 1e12:g}T tokens in {spec.days:g} days by estimate "
              f"({tried[n]:.1f} days)" if meets else
              f"the closest to {spec.days:g} days among the counts tried "
              f"({tried.get(n) or float('nan'):.1f} days by estimate)")
    return Sizing(n, reason, preps[n], tried)


def _meets(days: float | None, target: float) -> bool:
    return days is not None and days <= target
