"""Simulate one training step and report it: step time, tokens/s, MFU and the breakdown.

The breakdown is that of the rank that finished last (the step's end): its compute busy time,
its waits in all-to-alls (``a2a_exposed``), for pipeline inputs (``bubble``), in the DP
collectives (``dp_exposed``), and its optimizer time. The categories partition that rank's
time, so they sum to ``step_time_s``. ``tp_exposed`` is 0 (TP > 1 is not simulated yet).

MFU = model FLOPs of the step (3 x forward, :func:`sim.model.training_flops`, no MTP,
no recomputation) / (step time x GPUs x dense BF16 peak).
"""

from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

import numpy as np
import simpy

from sim.engine.network import FlowNetwork
from sim.engine.pxn import PxnRouter
from sim.engine.routing import Router
from sim.fabric_build import build_graph, fabric_for
from sim.model import training_flops
from sim.step.plan import build_plan
from sim.step.program import rank_program
from sim.step.spec import StepSpec
from sim.step.state import CATEGORIES, StepState


@dataclass(frozen=True)
class StepResult:
    """What one simulated step produced."""

    step_time_s: float
    tokens_per_s: float
    mfu: float
    tflops_per_gpu: float
    breakdown_s: MappingProxyType[str, float]
    last_rank: int
    stage_makespan_s: tuple[float, ...]
    engine: MappingProxyType[str, float]

    def to_dict(self) -> dict[str, Any]:
        """Plain types, for JSON."""
        return {
            "step_time_s": self.step_time_s,
            "tokens_per_s": self.tokens_per_s,
            "mfu": self.mfu,
            "tflops_per_gpu": self.tflops_per_gpu,
            "breakdown_s": dict(self.breakdown_s),
            "last_rank": self.last_rank,
            "stage_makespan_s": list(self.stage_makespan_s),
            "engine": dict(self.engine),
        }


def simulate_step(spec: StepSpec) -> StepState:
    """Run every rank of ``spec`` on one fabric; the finished shared state."""
    graph = build_graph(spec.fabric)
    fabric = fabric_for(graph, spec.gpu, spec.fabric.derate)
    spec.check_fabric(fabric.n_gpus)
    env = simpy.Environment()
    paths = (PxnRouter if spec.fabric.pxn else Router)(fabric, spec.fabric.multipath)
    net = FlowNetwork(env, paths, batch_window_rel=spec.fabric.batch_window_rel,
                      record_timeline=False)
    world = spec.layout.world_size
    st = StepState(spec, build_plan(spec), spec.ops(), net, np.zeros((world, len(CATEGORIES))),
                   np.full(world, np.nan), np.full(world, np.nan))
    for rank in range(world):
        env.process(rank_program(st, rank))
    env.run()
    if np.isnan(st.end_s).any():
        stuck = np.flatnonzero(np.isnan(st.end_s))[:4].tolist()
        raise RuntimeError(f"step did not finish: ranks {stuck} never ended")
    return st


def run_step(spec: StepSpec) -> StepResult:
    """Simulate ``spec`` once and summarise it."""
    st = simulate_step(spec)
    step_s = float(st.end_s.max())
    last = int(st.end_s.argmax())
    lay = spec.layout
    flops = training_flops(spec.model, spec.global_tokens, spec.seq_len, include_mtp=False)
    peak = st.plan.gpu.peak_tflops("bf16") * 1e12
    tflops = flops / step_s / lay.world_size / 1e12
    per_stage = st.last_op_s.reshape(lay.pp, -1).max(axis=1)
    return StepResult(
        step_time_s=step_s,
        tokens_per_s=spec.global_tokens / step_s,
        mfu=tflops * 1e12 / peak,
        tflops_per_gpu=tflops,
        breakdown_s=MappingProxyType(
            {c: float(st.time_s[last, i]) for i, c in enumerate(CATEGORIES)}
        ),
        last_rank=last,
        stage_makespan_s=tuple(float(t) for t in per_stage),
        engine=MappingProxyType({
            "flows": float(st.net.flows.n),
            "solves": float(st.net.solves),
            "batch_window_rel": spec.fabric.batch_window_rel,
        }),
    )
