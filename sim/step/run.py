"""Simulate one training step and report it: step time, tokens/s, MFU and the breakdown.

The breakdown is that of the rank that finished last (the step's end): its compute busy time,
its waits in all-to-alls (``a2a_exposed``), for pipeline inputs (``bubble``), in the DP
collectives (``dp_exposed``), in TP and CP collectives (``tp_exposed``, ``cp_exposed``), and
its optimizer time. The categories partition that rank's time, so they sum to ``step_time_s``.

In full mode ``StepResult.critical`` is the step's critical path (:mod:`moesim.step.critical`):
which stage, micro-batch, rank, expert or link set the step's end, and by how much.

``run_step(spec, mode="fast")`` simulates one representative pipeline instead of every rank
(:mod:`moesim.step.fast`; ``StepResult.mode`` says which).

MFU = model FLOPs of the step (3 x forward, :func:`moesim.model.training_flops`, no MTP,
no recomputation) / (step time x GPUs x dense BF16 peak).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

import numpy as np
import simpy

from moesim.engine.network import FlowNetwork
from moesim.engine.pxn import PxnRouter
from moesim.engine.routing import Router
from moesim.errors import ConfigError
from moesim.fabric.build import build_graph, fabric_for
from moesim.model import training_flops
from moesim.step.critical import CriticalPath, critical_path
from moesim.step.plan import build_plan
from moesim.step.program import rank_program
from moesim.step.spec import StepSpec
from moesim.step.state import CATEGORIES, StepState

MODES = ("full", "fast")


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
    mode: str = "full"  # "full": every rank simulated; "fast": one representative pipeline
    critical: CriticalPath | None = None  # full mode only (fast mode's estimates name no sender)

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
            "mode": self.mode,
            "critical_path": self.critical.to_dict() if self.critical else None,
        }


def simulate_step(spec: StepSpec) -> StepState:
    """Run every rank of ``spec`` on one fabric; the finished shared state."""
    graph = build_graph(spec.fabric)
    fabric = fabric_for(graph, spec.gpu, spec.fabric.derate)
    spec.check_fabric(fabric.n_gpus, graph.graph.get("nvlink_domain_size"))
    env = simpy.Environment()
    paths = (PxnRouter if spec.fabric.pxn else Router)(fabric, spec.fabric.multipath)
    net = FlowNetwork(env, paths, batch_window_rel=spec.fabric.batch_window_rel,
                      record_timeline=False)
    world = spec.layout.world_size
    st = StepState(spec, build_plan(spec), spec.ops(), net, np.zeros((world, len(CATEGORIES))),
                   np.full(world, np.nan), np.full(world, np.nan))
    return simulate_ranks(st, range(world))


def simulate_ranks(st: StepState, ranks: Iterable[int]) -> StepState:
    """Run ``rank_program`` of each of ``ranks`` on ``st`` until the step ends; ``st``."""
    ranks = list(ranks)
    for rank in ranks:
        st.env.process(rank_program(st, rank))
    st.env.run()
    if np.isnan(st.end_s[ranks]).any():
        stuck = [r for r in ranks if np.isnan(st.end_s[r])][:4]
        raise RuntimeError(f"step did not finish: ranks {stuck} never ended")
    return st


def run_step(spec: StepSpec, mode: str = "full") -> StepResult:
    """Simulate ``spec`` once and summarise it.

    ``mode="full"`` runs every rank; ``mode="fast"`` runs one representative pipeline
    (:func:`moesim.step.fast.run_fast_step`, with its defaults; see there for its assumptions).
    """
    if mode == "fast":
        from moesim.step.fast import run_fast_step  # fast builds on this module

        return run_fast_step(spec)
    if mode != "full":
        raise ConfigError("step.mode", f"unknown {mode!r}; allowed: " + ", ".join(MODES))
    st = simulate_step(spec)
    return summarise(spec, st, range(spec.layout.world_size), mode)


def summarise(spec: StepSpec, st: StepState, ranks: Iterable[int], mode: str) -> StepResult:
    """The step's result from the simulated ``ranks`` of ``st`` (all of them in full mode)."""
    sim = np.asarray(list(ranks), dtype=np.int64)
    step_s = float(st.end_s[sim].max())
    last = int(sim[int(st.end_s[sim].argmax())])
    lay = spec.layout
    flops = training_flops(spec.model, spec.global_tokens, spec.seq_len, include_mtp=False)
    peak = st.plan.gpu.peak_tflops("bf16") * 1e12
    tflops = flops / step_s / lay.world_size / 1e12
    last_op = np.full(lay.world_size, -np.inf)
    last_op[sim] = st.last_op_s[sim]
    per_stage = last_op.reshape(lay.pp, -1).max(axis=1)
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
        mode=mode,
        critical=critical_path(st) if mode == "full" else None,
    )
