"""Orchestrate a design: candidates -> estimates -> simulated EP groups -> chosen layout.

The chosen layout is the fastest by *simulated* step time among the candidates whose EP
group was simulated: the top :attr:`DesignSpec.simulate_top` distinct EP groups by estimate,
plus the best EP group on the other side of the NVLink-domain boundary if none of those
is, so that EP inside versus across the NVLink domain is decided by measured numbers.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from pathlib import Path

import networkx as nx

from moesim import topologies
from moesim.errors import ConfigError
from moesim.hardware import GpuSpec, get_gpu
from moesim.model import ModelConfig, ParamCounts, get_model, model_from_hf, param_counts
from moesim.parallel.placement import GroupPlacement
from moesim.plan.bom import BillOfMaterials, bill_of_materials
from moesim.plan.candidates import Candidate, enumerate_candidates
from moesim.plan.estimate import Estimate, estimate, mfu
from moesim.plan.evaluate import EpSim, composed_step_s, ep_scenario, simulate_ep
from moesim.plan.fabric_view import FabricView
from moesim.plan.modes import OVERSUBSCRIPTIONS, OversubPoint, SkewPoint, oversub_sims, skew_sweep
from moesim.plan.spec import DesignSpec


@dataclass(frozen=True)
class Ranked:
    """A fitting candidate with its estimate and, if simulated, its EP group's run."""

    cand: Candidate
    est: Estimate
    sim: EpSim | None
    step_time_s: float
    mfu: float

    @property
    def ep_key(self) -> tuple[int, int, int]:
        return self.cand.layout.ep, self.cand.layout.etp, self.est.tokens_per_rank


@dataclass
class DesignResult:
    spec: DesignSpec
    model: ModelConfig
    counts: ParamCounts
    gpu: GpuSpec
    domain: int
    candidates: list[Candidate]
    ranked: list[Ranked]
    chosen: Ranked
    placements: list[GroupPlacement]
    skew: list[SkewPoint]
    oversub: list[OversubPoint]
    oversub_ep: int
    bom: BillOfMaterials
    timings_s: dict[str, float] = field(default_factory=dict)


def load_model(name_or_path: str) -> ModelConfig:
    """A preset name, or a path to a Hugging Face ``config.json`` (file or directory)."""
    if Path(name_or_path).exists():
        return model_from_hf(name_or_path)
    return get_model(name_or_path)


def load_fabric(preset: str, gpus: int, **overrides: object) -> nx.DiGraph:
    try:
        graph = topologies.load_preset(preset, **overrides)
    except topologies.TopologyError as exc:
        raise ConfigError(f"fabric.{exc.field}", exc.problem) from exc
    have = sum(1 for _, k in graph.nodes(data="kind") if k == "gpu")
    if gpus > have:
        raise ConfigError("gpus", f"{gpus} GPUs do not fit fabric {preset!r}, which holds "
                                  f"{have}; choose --gpus <= {have} or a larger --fabric")
    return graph


def _simulate(spec: DesignSpec, model: ModelConfig, r: Ranked) -> EpSim:
    lay = r.cand.layout
    return simulate_ep(ep_scenario(model, spec.gpu, spec.fabric, ep=lay.ep, etp=lay.etp,
                                   tokens_per_rank=r.est.tokens_per_rank,
                                   seq_len=spec.seq_len, seed=spec.seed))


def _to_simulate(ranked: list[Ranked], top: int, domain: int) -> list[tuple[int, int, int]]:
    """EP groups to simulate: the best ``top`` by estimate, then the other side of NVLink.

    The other side's pick is preferably the best layout's twin that differs only in ep
    (same tp, pp, vpp, cp, dp), so the two runs isolate where expert parallelism lives.
    """
    keys: list[tuple[int, int, int]] = []
    for r in ranked:
        if r.cand.layout.ep > 1 and r.ep_key not in keys and len(keys) < top:
            keys.append(r.ep_key)
    if not keys:
        return keys
    best = ranked[0].cand.layout
    for inside in (True, False):
        if any((k[0] * k[1] <= domain) == inside for k in keys):
            continue
        side = [r for r in ranked if r.cand.layout.ep > 1
                and (r.ep_key[0] * r.ep_key[1] <= domain) == inside]
        twins = [r for r in side if (r.cand.layout.tp, r.cand.layout.pp, r.cand.layout.vpp,
                                     r.cand.layout.cp) == (best.tp, best.pp, best.vpp, best.cp)]
        if twins or side:
            keys.append((twins or side)[0].ep_key)
    return keys


def _compose(r: Ranked, sim: EpSim, spec: DesignSpec, model: ModelConfig,
             gpu: GpuSpec) -> Ranked:
    lay = r.cand.layout
    step = composed_step_s(r.est.step_time_s, r.est.moe_layer_s, r.est.moe_layers,
                           r.est.microbatches, lay.pp, lay.vpp, sim,
                           full_recompute=r.cand.recompute == "full")
    return replace(r, sim=sim, step_time_s=step, mfu=mfu(spec, model, gpu, step))


def design(spec: DesignSpec) -> DesignResult:
    """Answer ``spec``: see the module docstring."""
    clock = time.perf_counter()
    timings: dict[str, float] = {}
    model, gpu = load_model(spec.model), get_gpu(spec.gpu)
    graph = load_fabric(spec.fabric, spec.gpus)
    view = FabricView(graph, gpu.name)
    cands = enumerate_candidates(spec, model, gpu, view.domain_size)
    fitting = [c for c in cands if c.fits]
    if not fitting:
        closest = min((c for c in cands if c.memory), key=lambda c: c.memory.total_bytes)  # type: ignore[union-attr]
        raise ConfigError("gpus", f"no layout of {model.name} fits {spec.gpus} x {gpu.name}; "
                                  f"closest: {closest.name}: {closest.reason}")
    ranked = []
    for c in fitting:
        est = estimate(spec, model, gpu, c, view)
        ranked.append(Ranked(c, est, None, est.step_time_s,
                             mfu(spec, model, gpu, est.step_time_s)))
    ranked.sort(key=lambda r: r.step_time_s)
    timings["enumerate_and_estimate"] = time.perf_counter() - clock
    sims = {k: _simulate(spec, model, next(r for r in ranked if r.ep_key == k))
            for k in _to_simulate(ranked, spec.simulate_top, view.domain_size)}
    ranked = [_compose(r, sims[r.ep_key], spec, model, gpu) if r.ep_key in sims else r
              for r in ranked]
    simulated = sorted((r for r in ranked if r.sim), key=lambda r: r.step_time_s)
    ranked = simulated + [r for r in ranked if not r.sim]
    chosen = ranked[0]
    timings["simulate_candidates"] = time.perf_counter() - clock - sum(timings.values())
    skew, oversub, oversub_ep = _failure_modes(spec, model, gpu, chosen, ranked, view)
    timings["failure_modes"] = time.perf_counter() - clock - sum(timings.values())
    bom = bill_of_materials(graph, spec.gpus, gpu, model)
    timings["total"] = time.perf_counter() - clock
    return DesignResult(spec, model, param_counts(model), gpu, view.domain_size, cands, ranked,
                        chosen, view.place_all(chosen.cand.layout), skew, oversub,
                        oversub_ep, bom, timings)


def _failure_modes(spec: DesignSpec, model: ModelConfig, gpu: GpuSpec, chosen: Ranked,
                   ranked: list[Ranked], view: FabricView
                   ) -> tuple[list[SkewPoint], list[OversubPoint], int]:
    lay, est = chosen.cand.layout, chosen.est
    skew: list[SkewPoint] = []
    if lay.ep > 1:
        mult = est.moe_layers * (est.microbatches + (lay.pp - 1) / lay.vpp)
        skew = skew_sweep(model, spec.gpu, spec.fabric, ep=lay.ep, etp=lay.etp,
                          tokens_per_rank=est.tokens_per_rank, seq_len=spec.seq_len,
                          layer_multiplier=mult, seed=spec.seed)
    params = topologies.registry.read_preset(spec.fabric)["params"]
    if "oversubscription" not in params:
        return skew, [], 0
    cross = next((r for r in ranked if r.sim and r.ep_key[0] * r.ep_key[1] > view.domain_size),
                 None)
    sims: list[EpSim | None] = [None] * len(OVERSUBSCRIPTIONS)
    if cross is not None and cross.sim is not None:
        sims = list(oversub_sims(model, spec.gpu, spec.fabric, ep=cross.cand.layout.ep,
                                 etp=cross.cand.layout.etp, gpus_per_host=view.gpus_per_host,
                                 tokens_per_rank=cross.est.tokens_per_rank,
                                 seq_len=spec.seq_len, seed=spec.seed))
    points = []
    for o, sim in zip(OVERSUBSCRIPTIONS, sims, strict=True):
        graph = load_fabric(spec.fabric, spec.gpus, oversubscription=o)
        step = estimate(spec, model, gpu, chosen.cand, FabricView(graph, gpu.name)).step_time_s
        step += chosen.step_time_s - est.step_time_s  # keep the simulated MoE correction
        points.append(OversubPoint(o, sim, step))
    return skew, points, cross.cand.layout.ep if cross else 0
