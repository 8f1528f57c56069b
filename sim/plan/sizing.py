"""Choose the GPU count: the fewest whole scalable units that meet the goal, by estimate.

A goal is ``tokens`` in ``days`` (or a ``gpu_budget``, which is then the count, rounded down
to whole hosts or racks). Counts are whole scalable units: :data:`SU_GPUS` (32 HGX hosts,
the unit a rail fabric grows by), or for GB200 :data:`NVL72_SU_GPUS` (8 NVL72 racks, the
DGX SuperPOD GB200 scalable unit). The search, on the estimate (each point enumerates and
estimates every layout on the fabric built for that count, a few seconds):

1. start from the count that would train in time at :data:`START_MFU` (an assumption that
   only seeds the search), doubling while no layout fits in memory;
2. scale by the estimated days (goodput charged, as the report's days are) over the target
   (data parallelism scales throughput about linearly), then step one unit at a time: up
   while the estimate misses the target, down while one unit fewer still meets it, at most
   :data:`MAX_POINTS` counts in all.

The estimate proposes; :mod:`moesim.plan.confirm` then simulates the proposal and steps by
scalable units until the simulated days meet the goal (the count the report gives).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

from moesim.hardware import GpuSpec
from moesim.model import ModelConfig, flops_per_token
from moesim.plan.bom import goodput_of
from moesim.plan.cluster import (
    HGX_GPUS_PER_HOST,
    HOSTS_PER_SU,
    NVL72_GPUS,
    check_count,
    max_rail_gpus,
    unit_gpus,
)
from moesim.plan.prepare import Prepared, prepare
from moesim.plan.spec import DesignSpec

SU_GPUS = HOSTS_PER_SU * HGX_GPUS_PER_HOST
NVL72_SU_GPUS = 8 * NVL72_GPUS
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
    simulated: dict[int, float | None] = field(default_factory=dict)  # gpus -> sim. days
    # (moesim.plan.confirm: the best of its probe layouts, goodput charged)

    def to_dict(self) -> dict[str, object]:
        return {"gpus": self.gpus, "reason": self.reason,
                "tried": [{"gpus": g, "estimated_days": d,
                           "simulated_days": self.simulated.get(g)}
                          for g, d in sorted(self.tried.items())]}


def estimated_days(spec: DesignSpec, prep: Prepared) -> float | None:
    """Wall days to train ``spec.tokens`` with the best layout by estimate, interruptions and
    checkpoints charged (:func:`moesim.plan.bom.goodput_of`); None when no layout fits."""
    if not prep.ranked:
        return None
    ideal = spec.tokens * prep.ranked[0].est_per_token_s(spec.seq_len) / DAY_S
    return ideal / goodput_of(prep.gpus)


def su_gpus(gpu: str) -> int:
    """GPUs of one scalable unit of ``gpu`` clusters (module docstring)."""
    return NVL72_SU_GPUS if unit_gpus(gpu) == NVL72_GPUS else SU_GPUS


def _round_su(gpus: float, su: int) -> int:
    top = max_rail_gpus() - max_rail_gpus() % su
    return int(min(top, max(su, math.ceil(gpus / su) * su)))


def size_cluster(spec: DesignSpec, model: ModelConfig, gpu: GpuSpec,
                 say: Callable[[str], None]) -> Sizing:
    """The count for ``spec``'s goal (module docstring)."""
    su, unit = su_gpus(gpu.name), unit_gpus(gpu.name)
    if spec.gpu_budget is not None:
        gpus = spec.gpu_budget - spec.gpu_budget % unit
        check_count(gpus, gpu.name)
        prep = prepare(spec, model, gpu, gpus)
        return Sizing(gpus, f"the GPU budget ({spec.gpu_budget}, whole {unit}-GPU "
                            f"{'racks' if unit == NVL72_GPUS else 'hosts'})", prep,
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
    n = _round_su(flops / (spec.days * DAY_S * START_MFU * gpu.peak_tflops("bf16") * 1e12),
                  su)
    while days_at(n) is None and n < max_rail_gpus() and len(tried) < MAX_POINTS:
        n = _round_su(2 * n, su)
    d = days_at(n)
    if d is None:
        return Sizing(n, "no count tried fits the model in memory", preps[n], tried)
    n = _round_su(n * d / spec.days, su)
    while len(tried) < MAX_POINTS:
        d = days_at(n)
        if d is not None and d <= spec.days:
            lower = n - su
            if lower < su or (lower in tried and not _meets(tried[lower], spec.days)):
                break
            if lower not in tried and len(tried) >= MAX_POINTS:
                break
            if _meets(days_at(lower), spec.days):
                n = lower
                continue
            break
        if n >= max_rail_gpus():
            break
        n += su
    meets = _meets(tried.get(n), spec.days)
    reason = (f"the fewest whole scalable units ({su} GPUs each) whose best layout "
              f"trains {spec.tokens / 1e12:g}T tokens in {spec.days:g} days by estimate "
              f"({tried[n]:.1f} days)" if meets else
              f"the closest to {spec.days:g} days among the counts tried "
              f"({tried.get(n) or float('nan'):.1f} days by estimate)")
    return Sizing(n, reason, preps[n], tried)


def _meets(days: float | None, target: float) -> bool:
    return days is not None and days <= target
