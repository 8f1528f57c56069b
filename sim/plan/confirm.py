"""Confirm the count the estimate sized in simulated days, stepping by scalable units.

:func:`moesim.plan.sizing.size_cluster` proposes the fewest scalable units that meet the
goal by estimate. The estimate is not the simulator (moe-1t at 1,792 H200: 16.2 s estimated
vs 18.4 s simulated for tp2 pp16 ep8), so the design then simulates the best
:data:`PROBE` layouts by estimate at that count and charges goodput as the report does:

* if the best simulated one misses the days, it tries the next count up: one scalable unit
  more, or more where the shortfall says so (``gpus x simulated days / target``, rounded up
  to whole units: data parallelism scales throughput about linearly), and again, at most
  :data:`MAX_COUNTS` counts;
* if it meets them, one unit fewer is tried when the estimate there, scaled by the
  simulated/estimated ratio just seen, would meet them too.

The count chosen is the fewest simulated that meets the goal (else the most tried); its
layouts are then ranked in full (:func:`moesim.plan.rank.simulate_ranked`), which can only
improve on the probe's best.
"""

from __future__ import annotations

from collections.abc import Callable

from moesim.hardware import GpuSpec
from moesim.model import ModelConfig
from moesim.plan.bom import goodput_of
from moesim.plan.cluster import max_rail_gpus
from moesim.plan.prepare import Prepared, Ranked, prepare
from moesim.plan.rank import simulate_ranked
from moesim.plan.simulate import Pool
from moesim.plan.sizing import DAY_S, Sizing, _round_su, estimated_days, su_gpus
from moesim.plan.spec import DesignSpec

PROBE = 4  # layouts simulated per count while confirming
MAX_COUNTS = 4  # counts simulated at most


def simulated_days(spec: DesignSpec, gpus: int, r: Ranked) -> float:
    """Wall days to train ``spec.tokens`` at ``r``'s simulated step, goodput charged."""
    return spec.tokens * r.per_token_s(spec.seq_len) / DAY_S / goodput_of(gpus)


def confirm_count(spec: DesignSpec, model: ModelConfig, gpu: GpuSpec, sizing: Sizing,
                  jobs: int, dask: str | None, say: Callable[[str], None],
                  pool: Pool | None = None) -> tuple[Prepared, list[Ranked]]:
    """The count (``sizing`` updated: gpus, reason, simulated days per count tried) and its
    prepared layouts with the probe's simulated ones first (module docstring)."""
    su = su_gpus(gpu.name)
    preps = {sizing.gpus: sizing.prepared}
    probed: dict[int, list[Ranked]] = {}

    def probe(n: int) -> float | None:
        if n not in preps:
            preps[n] = prepare(spec, model, gpu, n)
            sizing.tried[n] = estimated_days(spec, preps[n])
        if not preps[n].ranked:
            return None
        say(f"confirming {n} GPUs: simulating its best {PROBE} layouts by estimate")
        probed[n] = simulate_ranked(spec, model, preps[n], jobs, dask, say,
                                    first=PROBE, cap=PROBE, pool=pool)
        sims = [r for r in probed[n] if r.sim]
        days = simulated_days(spec, preps[n].gpus, sims[0]) if sims else None
        sizing.simulated[n] = days
        say(f"  {n} GPUs: " + (f"{days:.1f} days simulated" if days is not None
                               else "no layout simulated"))
        return days

    n, top = sizing.gpus, max_rail_gpus() - max_rail_gpus() % su
    days = probe(n)
    while days is not None and days > spec.days and n < top and len(probed) < MAX_COUNTS:
        n = min(top, max(n + su, _round_su(n * days / spec.days, su)))
        days = probe(n)
    if days is not None and days <= spec.days and n - su >= su and n - su not in probed \
            and len(probed) < MAX_COUNTS:
        est_n, est_lower = sizing.tried.get(n), _est(spec, model, gpu, n - su, preps, sizing)
        if est_n and est_lower and est_lower * days / est_n <= spec.days \
                and (probe(n - su) or float("inf")) <= spec.days:
            n -= su
    meeting = [g for g, d in sizing.simulated.items() if d is not None and d <= spec.days]
    n = min(meeting) if meeting else max(probed)
    sizing.gpus, sizing.prepared = n, preps[n]
    sizing.reason = _reason(spec, sizing, su, n)
    return preps[n], probed[n]


def _est(spec: DesignSpec, model: ModelConfig, gpu: GpuSpec, n: int,
         preps: dict[int, Prepared], sizing: Sizing) -> float | None:
    if n not in preps:
        preps[n] = prepare(spec, model, gpu, n)
        sizing.tried[n] = estimated_days(spec, preps[n])
    return sizing.tried[n]


def _reason(spec: DesignSpec, sizing: Sizing, su: int, n: int) -> str:
    days = sizing.simulated[n]
    goal = f"{spec.tokens / 1e12:g}T tokens in {spec.days:g} days"
    lower = sizing.simulated.get(n - su)
    if lower is not None:
        below = f"; {n - su} GPUs: {lower:.1f} days simulated"
    elif sizing.tried.get(n - su) is not None:
        below = f"; {n - su} GPUs: {sizing.tried[n - su]:.1f} days by estimate (not simulated)"
    else:
        below = ""
    if days is not None and days <= spec.days:
        return (f"the fewest whole scalable units ({su} GPUs each) whose best simulated layout "
                f"trains {goal}: {days:.1f} days simulated, goodput charged{below}")
    return (f"the most tried; its best simulated layout misses {goal} "
            f"({days if days is not None else float('nan'):.1f} days simulated{below})")
