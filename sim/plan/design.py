"""Orchestrate a design: GPU count -> fabric -> candidates -> estimates -> simulated steps.

Without ``--gpus`` the estimate sizes the cluster (:mod:`moesim.plan.sizing`) and the
simulator confirms the count (:mod:`moesim.plan.confirm`: steps up by scalable units while
the best simulated layouts miss the days). At the count, :mod:`moesim.plan.rank` ranks the
layouts by the whole-step simulator in fast mode (the estimate only prunes); the chosen
layout is the fastest simulated one per token, and the step reported is its simulated step.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from moesim.fabric.spec import FabricSpec
from moesim.hardware import GpuSpec, get_gpu
from moesim.model import ModelConfig, ParamCounts, param_counts
from moesim.parallel.placement import GroupPlacement
from moesim.plan.bom import BillOfMaterials, bill_of_materials
from moesim.plan.candidates import Candidate
from moesim.plan.cluster import AUTO, check_count, fabric_label
from moesim.plan.confirm import confirm_count
from moesim.plan.prepare import Ranked, load_model, no_fit, prepare
from moesim.plan.prices import Prices, load_prices
from moesim.plan.rank import simulate_ranked
from moesim.plan.sizing import Sizing, size_cluster
from moesim.plan.spec import DesignSpec
from moesim.sweep.execute import open_executor

Say = Callable[[str], None]


@dataclass
class DesignResult:
    spec: DesignSpec
    model: ModelConfig
    counts: ParamCounts
    gpu: GpuSpec
    gpus: int
    fabric: FabricSpec
    domain: int
    candidates: list[Candidate]
    ranked: list[Ranked]  # simulated first (fastest per token first), then by estimate
    chosen: Ranked
    placements: list[GroupPlacement]
    bom: BillOfMaterials
    sizing: Sizing | None = None  # when the count was searched
    prices: Prices = field(default_factory=Prices)
    asked_gpus: int = 0  # GPUs of the fabric (more than ``gpus`` when no layout fit them all)
    why_fewer: str = ""
    timings_s: dict[str, float] = field(default_factory=dict)

    @property
    def fabric_name(self) -> str:
        return fabric_label(self.fabric)

    @property
    def simulated(self) -> list[Ranked]:
        return [r for r in self.ranked if r.sim]


def design(spec: DesignSpec, jobs: int = 1, dask: str | None = None,
           say: Say | None = None) -> DesignResult:
    """Answer ``spec``: see the module docstring (``say`` gets one line per stage)."""
    say = say or (lambda _: None)
    clock = time.perf_counter()
    timings: dict[str, float] = {}
    model, gpu = load_model(spec.model), get_gpu(spec.gpu)
    prices = load_prices(spec.prices)
    with open_executor(jobs, dask) as pool:  # the workers start once, for every round
        sizing, ranked = None, None
        if spec.gpus is None:
            say("sizing the cluster (estimates over GPU counts)")
            sizing = size_cluster(spec, model, gpu, say)
            gpus, prep = sizing.gpus, sizing.prepared
            if spec.gpu_budget is None and prep.ranked:
                prep, ranked = confirm_count(spec, model, gpu, sizing, jobs, dask, say, pool)
                gpus = sizing.gpus
        else:
            gpus = spec.gpus
            if spec.fabric == AUTO:
                check_count(gpus, spec.gpu)
            say(f"building the fabric and estimating layouts for {gpus} GPUs")
            prep = prepare(spec, model, gpu, gpus)
        if not prep.ranked:
            raise no_fit(model, gpu, prep)
        timings["enumerate_and_estimate"] = time.perf_counter() - clock
        ranked = simulate_ranked(spec, model, prep, jobs, dask, say, ranked, pool=pool)
        timings["simulate_candidates"] = time.perf_counter() - clock - sum(timings.values())
    chosen = ranked[0]
    bom = bill_of_materials(prep.view.graph, prep.asked_gpus or gpus, gpu, model, prices)
    timings["total"] = time.perf_counter() - clock
    say(f"done in {timings['total']:.1f} s")
    return DesignResult(spec, model, param_counts(model), gpu, prep.gpus, prep.fabric,
                        prep.view.domain_size, prep.candidates, ranked, chosen,
                        prep.view.place_all(chosen.cand.layout), bom, sizing=sizing,
                        prices=prices, asked_gpus=prep.asked_gpus or gpus,
                        why_fewer=prep.why_fewer, timings_s=timings)
