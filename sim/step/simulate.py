"""Run rank programs on a step's shared state; full mode's state (every rank, one fabric)."""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import simpy

from moesim.engine.network import FlowNetwork
from moesim.engine.pxn import PxnRouter
from moesim.engine.routing import Router
from moesim.fabric.build import build_graph, fabric_for
from moesim.step.loop import run_step_env
from moesim.step.plan import build_plan
from moesim.step.program import rank_program
from moesim.step.spec import StepSpec
from moesim.step.state import CATEGORIES, StepState


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
    route_pipeline(paths, spec)
    st = StepState(spec, build_plan(spec), spec.ops(), net, np.zeros((world, len(CATEGORIES))),
                   np.full(world, np.nan), np.full(world, np.nan))
    return simulate_ranks(st, range(world))


def route_pipeline(router: Router, spec: StepSpec) -> None:
    """Build the routes of every pipeline send (each rank to the same tp / cp / dp rank of
    the next and previous stage) in one router call, one route search per block of
    destinations, instead of one per send as they happen; routes depend only on their pair,
    so the sends are routed as without it."""
    lay = spec.layout
    if lay.pp < 2:
        return
    ranks = np.arange(lay.world_size)
    per = lay.world_size // lay.pp  # ranks of a stage: stage s holds [s * per, (s + 1) * per)
    nxt = (ranks + per) % lay.world_size
    router.routes(np.concatenate((ranks, nxt)), np.concatenate((nxt, ranks)))


def simulate_ranks(st: StepState, ranks: Iterable[int]) -> StepState:
    """Run ``rank_program`` of each of ``ranks`` on ``st`` until the step ends; ``st``.
    A watcher (:func:`moesim.step.loop.watching`) hears how many backward passes are done."""
    ranks = list(ranks)
    for rank in ranks:
        st.env.process(rank_program(st, rank))
    run_step_env(st.net, st.b_count, len(ranks) * st.spec.layout.vpp * st.spec.microbatches)
    if np.isnan(st.end_s[ranks]).any():
        stuck = [r for r in ranks if np.isnan(st.end_s[r])][:4]
        raise RuntimeError(f"step did not finish: ranks {stuck} never ended")
    return st
