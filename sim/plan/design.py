"""Orchestrate a design: GPU count -> fabric -> candidates -> estimates -> simulated steps.

The estimate (:mod:`moesim.plan.estimate`) only prunes: the layouts that fit in memory are
ordered by estimated seconds per token, and the best :attr:`DesignSpec.simulate_min` run
through the whole-step simulator in fast mode (:mod:`moesim.plan.simulate`). Then every
layout the estimate cannot rule out runs too: one whose estimate, scaled by the lowest
simulated/estimated ratio seen so far, would beat the best simulated step (up to
:attr:`DesignSpec.simulate_max`). The chosen layout is the fastest simulated one per token,
and the step reported is its simulated step.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from moesim.errors import ConfigError
from moesim.fabric.spec import FabricSpec
from moesim.hardware import GpuSpec, get_gpu
from moesim.model import ModelConfig, ParamCounts, param_counts
from moesim.parallel.placement import GroupPlacement
from moesim.plan.bom import BillOfMaterials, bill_of_materials
from moesim.plan.candidates import Candidate
from moesim.plan.cluster import AUTO, check_count, fabric_label
from moesim.plan.prepare import Prepared, Ranked, load_model, no_fit, prepare
from moesim.plan.prices import Prices, load_prices
from moesim.plan.simulate import SimTask, simulate_all, step_spec
from moesim.plan.sizing import Sizing, size_cluster
from moesim.plan.spec import DesignSpec

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


def to_simulate(ranked: list[Ranked], seq_len: int, first: int, cap: int) -> list[int]:
    """Indices still worth simulating: the best ``first`` by estimate, then each one whose
    estimate x the lowest simulated/estimated ratio seen beats the best simulated step."""
    done = [i for i, r in enumerate(ranked) if r.sim or r.sim_error]
    if not done:
        return list(range(min(first, len(ranked), cap)))
    sims = [ranked[i] for i in done if ranked[i].sim]
    if not sims or len(done) >= cap:
        return []
    low = min(r.step_time_s / r.est.step_time_s for r in sims)
    best = min(r.per_token_s(seq_len) for r in sims)
    todo = [i for i, r in enumerate(ranked) if i not in done
            and r.est_per_token_s(seq_len) * low < best]
    return todo[: cap - len(done)]


def work(cand: Candidate) -> int:
    """A proxy of a candidate's fast-mode wall time: the representative pipeline's ranks
    (pp x tp x cp) times its micro-batch passes; the order it sets only balances workers."""
    lay = cand.layout
    return lay.pp * lay.tp * lay.cp * cand.num_microbatches


def simulate_ranked(spec: DesignSpec, model: ModelConfig, prep: Prepared, jobs: int,
                    dask: str | None, say: Say) -> list[Ranked]:
    """Simulate what :func:`to_simulate` asks until it asks nothing; the ranked list."""
    ranked = list(prep.ranked)
    while todo := to_simulate(ranked, spec.seq_len, spec.simulate_min, spec.simulate_max):
        say(f"simulating {len(todo)} candidate(s) in fast mode (-j {jobs}"
            + (f", dask {dask}" if dask else "") + ")")
        todo.sort(key=lambda i: -work(ranked[i].cand))  # longest first: workers end together
        tasks = [SimTask(i, step_spec(spec, model, ranked[i].cand, prep.fabric),
                         spec.routing_draws) for i in todo]
        recs = simulate_all(tasks, jobs, dask, lambda d, n: say(f"  simulated {d}/{n}"))
        for i, rec in recs.items():
            ranked[i] = Ranked(ranked[i].cand, ranked[i].est, rec.get("result"),
                               rec.get("error", ""), float(rec["wall_s"]))
    sims = sorted((r for r in ranked if r.sim), key=lambda r: r.per_token_s(spec.seq_len))
    if not sims:
        errors = "; ".join(sorted({r.sim_error for r in ranked if r.sim_error}))[:300]
        raise ConfigError("design", f"no candidate could be simulated: {errors}")
    return sims + [r for r in ranked if not r.sim]


def design(spec: DesignSpec, jobs: int = 1, dask: str | None = None,
           say: Say | None = None) -> DesignResult:
    """Answer ``spec``: see the module docstring (``say`` gets one line per stage)."""
    say = say or (lambda _: None)
    clock = time.perf_counter()
    timings: dict[str, float] = {}
    model, gpu = load_model(spec.model), get_gpu(spec.gpu)
    prices = load_prices(spec.prices)
    sizing = None
    if spec.gpus is None:
        say("sizing the cluster (estimates over GPU counts)")
        sizing = size_cluster(spec, model, gpu, say)
        gpus, prep = sizing.gpus, sizing.prepared
    else:
        gpus = spec.gpus
        if spec.fabric == AUTO:
            check_count(gpus, spec.gpu)
        say(f"building the fabric and estimating layouts for {gpus} GPUs")
        prep = prepare(spec, model, gpu, gpus)
    if not prep.ranked:
        raise no_fit(model, gpu, prep)
    timings["enumerate_and_estimate"] = time.perf_counter() - clock
    ranked = simulate_ranked(spec, model, prep, jobs, dask, say)
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
