"""Simulate one EP group of a candidate on the engine and compose the step analytically.

What is simulated: one expert-parallel group (``ep`` ranks, ``tokens_per_rank`` tokens of a
micro-batch each) through :data:`SIM_LAYERS` MoE layers forward and backward on the actual
fabric (rank r of the group on GPU ``r * etp``: with etp=1 Megatron's expert grid makes EP
groups runs of consecutive ranks, :mod:`moesim.parallel.layout`),
InfiniBand D-mod-K routing and finish
batching at 2 % (:mod:`moesim.engine.network`). Its per-layer MoE time (the four all-to-alls
and the expert GEMMs, forward + backward) replaces the estimate's MoE part, scaled by the
stage's MoE layers and the micro-batches. The full pipelined step — every stage and EP
group at once, overlap included — is issue 5; this is a per-layer simulation composed
analytically.

To stay fast, a rail fabric is trimmed to the scalable units (SUs) that hold the EP group
(the preset with fewer ``hosts``): the group's own paths never leave them, and only its own
traffic is simulated (other groups' traffic is not; on a 1:1 fabric it does not share
links with this group's flows under D-mod-K, an assumption on oversubscribed ones).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np

from moesim import topologies
from moesim.model import ModelConfig
from moesim.router import RouterConfig
from moesim.router.metrics import imbalance
from moesim.runner.group import simulate
from moesim.scenario import FabricSpec, Scenario, WorkloadSpec

SIM_LAYERS = 1  # one MoE layer: the engine cost grows as ep^2 flows per all-to-all
BATCH_WINDOW_REL = 0.02


@dataclass(frozen=True)
class EpSim:
    """Per MoE layer and micro-batch, forward + backward, of one simulated EP group."""

    ep: int
    tokens_per_rank: int
    a2a_s: float
    experts_s: float
    experts_fwd_s: float  # the forward share (what full recompute runs again)
    expert_ratio: float  # max / mean tokens per expert (the router-log signal)
    rank_ratio: float    # max / mean token copies per EP rank (what the slowest GEMM pays)
    fabric_gpus: int     # GPUs of the (trimmed) fabric simulated
    wall_s: float

    @property
    def moe_layer_s(self) -> float:
        return self.a2a_s + self.experts_s


Overrides = tuple[tuple[str, object], ...]


def sim_fabric_params(preset: str, gpus_needed: int, overrides: Overrides = ()) -> Overrides:
    """Preset overrides that trim a rail fabric to the SUs holding ``gpus_needed`` GPUs."""
    params = dict(topologies.registry.read_preset(preset)["params"])
    params.update(overrides)
    if "hosts" in params and "hosts_per_su" in params and "gpus_per_host" in params:
        per_su = int(params["hosts_per_su"]) * int(params["gpus_per_host"])
        hosts = math.ceil(gpus_needed / per_su) * int(params["hosts_per_su"])
        if hosts < int(params["hosts"]):
            return (*overrides, ("hosts", hosts))
    return overrides


def ep_scenario(model: ModelConfig, gpu: str, fabric: str, *, ep: int, etp: int,
                tokens_per_rank: int, seq_len: int, router: RouterConfig | None = None,
                overrides: tuple[tuple[str, object], ...] = (), seed: int = 1) -> Scenario:
    """The scenario of one EP group of a layout (see the module docstring)."""
    params = sim_fabric_params(fabric, ep * etp, overrides)
    return Scenario(
        name=f"ep{ep}-group", model=model, gpu=gpu, seed=seed,
        fabric=FabricSpec(preset=fabric, params=params, multipath="dmodk",
                          batch_window_rel=BATCH_WINDOW_REL),
        workload=WorkloadSpec(ep=ep, layers=min(SIM_LAYERS, model.n_moe_layers),
                              tokens_per_rank=max(1, tokens_per_rank), seq_len=seq_len,
                              gpu_stride=etp),
        router=router or RouterConfig(),
    )


def simulate_ep(scn: Scenario) -> EpSim:
    """Run ``scn`` once; per-layer a2a and expert time on the slowest rank's timeline."""
    start = time.perf_counter()
    sim = simulate(scn)
    ends = np.maximum.accumulate(np.nanmax(sim.trace.end_s, axis=1))
    inc = np.diff(ends, prepend=0.0)
    a2a = sum(float(inc[p.index]) for p in sim.trace.phases if p.is_a2a)
    experts = sum(float(inc[p.index]) for p in sim.trace.phases
                  if p.name.startswith("experts"))
    fwd = sum(float(inc[p.index]) for p in sim.trace.phases if p.name == "experts")
    layers = scn.workload.layers
    stats = [imbalance(r) for r in sim.routings]
    return EpSim(ep=scn.workload.ep, tokens_per_rank=scn.workload.tokens_per_rank,
                 a2a_s=a2a / layers, experts_s=experts / layers,
                 experts_fwd_s=fwd / layers,
                 expert_ratio=max(s["expert_ratio"] for s in stats),
                 rank_ratio=max(s["rank_ratio"] for s in stats),
                 fabric_gpus=sim.fabric.n_gpus, wall_s=time.perf_counter() - start)


def composed_step_s(estimate_step_s: float, estimate_moe_layer_s: float, moe_layers: int,
                    microbatches: int, pp: int, vpp: int, sim: EpSim,
                    full_recompute: bool = False) -> float:
    """The estimate with its MoE part replaced by the simulated one (bubble included).

    Under full recompute the experts' forward runs twice; the simulated forward is added.
    """
    moe = sim.moe_layer_s + (sim.experts_fwd_s if full_recompute else 0.0)
    delta = (moe - estimate_moe_layer_s) * moe_layers
    return estimate_step_s + delta * (microbatches + (pp - 1) / vpp)
