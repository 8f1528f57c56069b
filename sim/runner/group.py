"""Group mode: assemble one EP group's layer stack into engine + workload, simulate it once.

``simulate(spec)`` returns the raw material (trace, network, routings, costs);
:mod:`moesim.runner.group_run` turns it, with its counterfactuals, into a result record.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import numpy as np
import simpy

from moesim.engine.fabric import Fabric
from moesim.engine.network import FlowNetwork
from moesim.engine.pxn import PxnRouter
from moesim.engine.routing import Router
from moesim.errors import ConfigError
from moesim.fabric.build import build_graph, fabric_for
from moesim.hardware import get_gpu
from moesim.router import RouterConfig, RoutingResult, route_tokens
from moesim.scenario.checks import check_slow_gpus
from moesim.scenario.schema import GroupSpec
from moesim.workload.costs import LayerCosts, LayerShape, layer_costs
from moesim.workload.moe_stack import StackTrace, WireFormat, replay_moe_stack

if TYPE_CHECKING:
    import networkx as nx


@dataclass
class Simulation:
    """One simulated run: what happened, on what."""

    scenario: GroupSpec
    fabric: Fabric
    gpus: np.ndarray
    slowdown: np.ndarray  # per EP rank
    routings: list[RoutingResult]
    costs: list[LayerCosts]
    trace: StackTrace
    net: FlowNetwork

    @property
    def step_time_s(self) -> float:
        return float(np.nanmax(self.trace.end_s))


def route_layers(scn: GroupSpec, router: RouterConfig) -> list[RoutingResult]:
    """The routing of each replayed layer (seeded by the scenario)."""
    m, wl = scn.model, scn.workload
    return [
        route_tokens(
            router,
            tokens_per_rank=wl.tokens_per_rank,
            n_ranks=scn.ep,
            n_experts=m.n_routed_experts,
            top_k=m.top_k,
            seed=scn.seed,
            layer=layer,
            n_group=m.n_group,
            topk_group=m.topk_group,
        )
        for layer in range(wl.layers)
    ]


def simulate(
    scn: GroupSpec,
    *,
    graph: nx.DiGraph | None = None,
    balanced: bool = False,
    ignore_slowdowns: bool = False,
) -> Simulation:
    """Simulate ``scn`` once.

    ``balanced`` swaps in the uniform router (what Megatron's
    --moe-router-force-load-balancing produces: random affinities, balanced in
    expectation, with each token's experts spread as a real router spreads them).
    """
    gpu = get_gpu(scn.gpu)
    fabric = fabric_for(
        graph if graph is not None else build_graph(scn.fabric), gpu.name, scn.fabric.derate
    )
    gpus = np.array(scn.placement.gpu_ids(scn.ep), dtype=np.int64)
    if gpus.max() >= fabric.n_gpus:
        first = scn.placement.first_gpu >= fabric.n_gpus
        raise ConfigError(
            "placement.first_gpu" if first else "placement.gpu_stride",
            f"EP group needs GPU {int(gpus.max())} but the fabric has {fabric.n_gpus} GPUs",
        )
    check_slow_gpus(scn.slow_gpus, fabric.n_gpus)
    slow = dict(scn.slow_gpus)
    slowdown = np.array([1.0 if ignore_slowdowns else slow.get(int(g), 1.0) for g in gpus])
    router = replace(scn.router, kind="uniform") if balanced else scn.router
    routings = route_layers(scn, router)
    shape = LayerShape(scn.model, scn.workload.tokens_per_rank, scn.workload.seq_len)
    costs = [layer_costs(shape, gpu, r, slowdown) for r in routings]
    env = simpy.Environment()
    paths = (PxnRouter if scn.fabric.pxn else Router)(fabric, scn.fabric.multipath)
    net = FlowNetwork(env, paths, batch_window_rel=scn.fabric.batch_window_rel)
    wire = WireFormat(
        scn.model.hidden_size, scn.workload.dispatch_dtype, scn.workload.combine_dtype
    )
    trace = replay_moe_stack(
        env,
        net,
        gpus,
        routings,
        costs,
        wire,
        dedup=scn.workload.dedup,
        backward=scn.workload.backward,
    )
    env.run()
    return Simulation(scn, fabric, gpus, slowdown, routings, costs, trace, net)
