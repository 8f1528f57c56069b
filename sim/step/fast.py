"""Fast mode: simulate one representative pipeline and time what spans replicas by estimate.

Full mode (:func:`sim.step.run.simulate_step`) runs every rank. Fast mode assumes every DP
replica behaves alike and runs only the ranks with dense-grid ``dp == 0`` (every pipeline
stage, with their TP / CP ranks), with :func:`sim.step.program.rank_program` unchanged, on
the sub-fabric of their hosts (:mod:`sim.step.subfabric`): pipeline sends and TP / CP
collectives are real flows. What spans replicas is timed by :mod:`sim.step.estimate`:

* an EP all-to-all completes, for every member, at ``t_sync + A2ATimer.time_s`` where
  ``t_sync`` is when the members last left an all-to-all together (the representative's send
  time minus its own release offset) and member ``e`` releases its row ``o_e`` later:
  ``experts_fwd[e]`` (x its slowdown) before ``combine``, ``experts_bwd[e]`` before
  ``dispatch_bwd``, 0 before ``dispatch`` / ``combine_bwd``. So a hot expert rank still
  delays the representative, but members leave every all-to-all together (the engine lets
  each receiver go when its own bytes are in);
* DP / EDP ring reduce-scatters and all-gathers: :class:`sim.step.estimate.HostRingTimer`.

Not seen by fast mode, by design: anything that breaks the symmetry outside the
representative pipeline (a degraded link or slow GPU of another replica; tested: full mode
slows down, fast mode does not), and contention between different replicas' traffic beyond
what the estimates count. ``routing_draws = R`` reuses the routing of the first ``R`` MoE
layers cyclically (a stationary router; drawing one routing costs about 0.1 s at EP64 with
4096 tokens per rank); ``None`` draws every layer as full mode does.

Wall time: 1.7 s for a 9,216-GPU moe-1t step (benchmarks/bench_step.py, command there).

Measured (tests/test_step_fast.py): 32 GPUs (rail, 8 hosts x 4 H100), mixtral-shaped 4
layers, EP8 over 2 hosts, PP2, DP16, 3 micro-batches: fast 3.2 % below full (full 70.0 ms,
fast 67.7 ms; 2 micro-batches: 3.7 %); with host 3's gpu1-nic1 link at 25 % (a replica
that is not the representative): full +54 %, fast unchanged. The sub-fabric keeps D-mod-K
routes identical, so the representative's own flows match full mode's.

At scale the two modes part (bench_step.py: 1,024 GPUs, moe-1t cut to 16 layers, PP16 EP64
DP64, 1 micro-batch: fast 0.967 s, full 1.293 s; 128 GPUs, 4 layers, PP2 EP64: fast 15-19 %
below full). The backward of each stage is about 30 % slower in full mode at 1,024 GPUs
(cause not traced; one candidate: the all-to-all estimate's release-offset gap,
sim.step.estimate), and the DP
all-gathers of the tail take 1.6-2.7x their alone time (traced). Replaying the same rings in the
engine with the full run's per-rank start times (a few ms apart) reproduces that slowdown,
and with equal start times it vanishes: a ring rank that falls behind sends its backlog of
chunks as concurrent flows that share its link fairly, so every chunk of the backlog arrives
late and the successor idles (NCCL sends chunks in order). Fast mode's FIFO ring model does
not do that; which of the two is closer to a real ring is not measured here.

Not supported: expert-TP groups outside the pipeline (``etp`` other than 1 or ``tp``);
the critical-path walk (its all-to-alls have no flows).
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import numpy as np
import simpy

import sim.step.plan as plan_mod
from sim.collectives.alltoall import AllToAll
from sim.engine.network import FlowNetwork
from sim.errors import ConfigError
from sim.fabric_build import build_graph
from sim.hardware import GpuSpec
from sim.layout import ParallelLayout
from sim.router import RoutingResult
from sim.step.estimate import A2ATimer, HostRingTimer, RingPairs, ring_pairs
from sim.step.plan import LayerPlan, StepPlan
from sim.step.run import StepResult, simulate_ranks, summarise
from sim.step.spec import StepSpec
from sim.step.state import CATEGORIES, StepState
from sim.step.subfabric import GraphIndex, MappedRouter
from sim.workload.costs import LayerCosts, LayerShape

RELEASE = {"combine": "experts_fwd", "dispatch_bwd": "experts_bwd"}
"""All-to-all phase -> the per-EP-rank compute its members run just before sending."""


@dataclass
class FastAllToAll(AllToAll):
    """An all-to-all whose members all finish at the estimated time (no flows)."""

    offsets_s: np.ndarray = field(kw_only=True)  # members' release offsets
    end_s: float = field(kw_only=True)  # last arrival, from the reference time (A2ATimer)

    def __post_init__(self) -> None:
        self.done: simpy.Event = self.net.env.event()
        self._sent = False

    def send(self, rank: int) -> None:
        """The first simulated member's send fixes the group's reference time."""
        if self._sent:
            return
        self._sent = True
        env = self.net.env
        end_s = env.now - float(self.offsets_s[rank]) + self.end_s
        env.timeout(max(end_s - env.now, 0.0)).callbacks.append(self._fire)

    def _fire(self, _: simpy.Event) -> None:
        self.done.succeed(-1)

    def received(self, rank: int) -> simpy.Event:
        return self.done


@dataclass
class FastState(StepState):
    """StepState whose cross-replica collectives are estimates (module docstring)."""

    index: GraphIndex = field(kw_only=True)
    a2a_timers: dict[int, A2ATimer] = field(default_factory=dict)
    ring_timers: dict[int, HostRingTimer] = field(default_factory=dict)
    host_routers: dict[int, MappedRouter] = field(default_factory=dict)
    host_rings: dict[int, RingPairs] = field(default_factory=dict)
    a2a_timing: dict[tuple[int, int, str], tuple[np.ndarray, float]] = field(
        default_factory=dict)  # (group, layer, phase) -> (release offsets, end)

    def all_to_all(self, rank: int, layer: LayerPlan, mb: int, phase: str) -> AllToAll:
        group = self.ep_group[rank]
        key = (group[0], layer.index, mb, phase)
        if key not in self.a2a:
            gpus = np.asarray(group, dtype=np.int64)
            if group[0] not in self.a2a_timers:
                router = self._host_router(rank)
                if (router.local_of[gpus] < 0).any():  # another rep rank's group on the host:
                    router = self.net.router  # the pipeline's sub-fabric holds every EP group
                self.a2a_timers[group[0]] = A2ATimer(router, gpus)
            timing = self.a2a_timing.get(key[:2] + key[3:])
            if timing is None:
                offsets = self._offsets(layer, phase, gpus)
                timing = self.a2a_timing[key[:2] + key[3:]] = (
                    offsets, self.a2a_timers[group[0]].time_s(layer.a2a_bytes[phase], offsets))
            self.a2a[key] = FastAllToAll(self.net, gpus, layer.a2a_bytes[phase], len(self.a2a),
                                         offsets_s=timing[0], end_s=timing[1])
        return self.a2a[key]

    def _offsets(self, layer: LayerPlan, phase: str, gpus: np.ndarray) -> np.ndarray:
        if phase not in RELEASE or layer.moe is None:
            return np.zeros(gpus.size)
        return np.asarray(getattr(layer.moe, RELEASE[phase]), dtype=float) * self.slowdown[gpus]

    def join_ring(self, rank: int, kind: str, item: int, size_bytes: float) -> simpy.Event:
        host = self.index.host_of(rank)
        if host not in self.ring_timers:
            router = self._host_router(rank)
            self.ring_timers[host] = HostRingTimer(self.env, router, self.host_rings[host])
        return self.ring_timers[host].join(kind, item, size_bytes)

    def _host_router(self, rank: int) -> MappedRouter:
        """One sub-fabric per host of the pipeline: its ring pairs and ``rank``'s EP group."""
        host = self.index.host_of(rank)
        if host not in self.host_routers:
            stage = self.coords[rank]["pp"]
            ranks = [g for g in self._host_gpus(host) if self.coords[g]["pp"] == stage]
            rp = self.host_rings[host] = ring_pairs(ranks or [rank], self._ring_group)
            self.host_routers[host] = self.index.router(rp.ends + list(self.ep_group[rank]))
        return self.host_routers[host]

    def _host_gpus(self, host: int) -> list[int]:
        idx = self.index
        return sorted(int(idx.graph.nodes[n]["gpu"]) for n in idx.host_nodes.get(host, [])
                      if idx.graph.nodes[n].get("kind") == "gpu"
                      and int(idx.graph.nodes[n]["gpu"]) < self.spec.layout.world_size)

    def _ring_group(self, kind: str, rank: int) -> tuple[int, ...]:
        lay = self.spec.layout
        if kind != "dp":
            return lay.group_of(kind, rank)
        c = self.coords[rank]  # the DP x CP group, as sim.step.tpcp.dense_dp_group, vectorised
        dp, cp = np.meshgrid(np.arange(lay.dp), np.arange(lay.cp), indexing="ij")
        ranks = c["tp"] + lay.tp * (cp + lay.cp * (dp + lay.dp * c["pp"]))
        return tuple(int(r) for r in np.sort(ranks, axis=None))


def representative_ranks(lay: ParallelLayout) -> list[int]:
    """The ranks of dense-grid ``dp == 0``: every stage, TP and CP rank of one pipeline."""
    return sorted(lay.dense_rank(tp=t, cp=c, dp=0, pp=p)
                  for p in range(lay.pp) for c in range(lay.cp) for t in range(lay.tp))


@contextmanager
def cyclic_routing(spec: StepSpec, draws: int | None) -> Iterator[None]:
    """While active, MoE layer k (in model order) reuses the routing of MoE layer k mod draws
    (and its per-rank costs: same routing, same shape, no slowdowns).

    Patches :func:`sim.step.plan.route_layer` and ``layer_costs`` there (restored on exit); a
    ``route`` hook on ``build_plan`` would be the cleaner seam.
    """
    if draws is None:
        yield
        return
    if isinstance(draws, bool) or not isinstance(draws, int) or draws < 1:
        raise ConfigError("fast.routing_draws", f"must be a positive integer, got {draws!r}")
    moe = [i for i, is_moe in enumerate(spec.model.moe_layers) if is_moe]
    source = {layer: moe[k % draws] for k, layer in enumerate(moe)}
    original, drawn = plan_mod.route_layer, {}

    def reused(s: StepSpec, layer: int) -> RoutingResult:
        first = source.get(layer, layer)
        if first not in drawn:
            drawn[first] = original(s, first)
        return drawn[first]

    costs_of, priced = plan_mod.layer_costs, {}

    def cached_costs(shape: LayerShape, gpu: GpuSpec, routing: RoutingResult,
                     slowdown: np.ndarray) -> LayerCosts:
        key = id(routing)  # one entry per draw; the draws stay alive in ``drawn``
        if key not in priced:
            priced[key] = costs_of(shape, gpu, routing, slowdown)
        return priced[key]

    plan_mod.route_layer, plan_mod.layer_costs = reused, cached_costs  # type: ignore[assignment]
    try:
        yield
    finally:
        plan_mod.route_layer, plan_mod.layer_costs = original, costs_of


def fast_plan(spec: StepSpec, routing_draws: int | None = None) -> StepPlan:
    """:func:`sim.step.plan.build_plan` with ``routing_draws`` distinct routings."""
    with cyclic_routing(spec, routing_draws):
        return plan_mod.build_plan(spec)


def simulate_fast(spec: StepSpec, routing_draws: int | None = None) -> tuple[FastState,
                                                                             list[int]]:
    """Run the representative pipeline of ``spec``; (finished state, its ranks)."""
    lay = spec.layout
    if lay.etp > 1 and lay.etp != lay.tp:
        raise ConfigError("layout.etp", "fast mode needs etp == 1 or etp == tp (expert-TP "
                          "groups inside the representative pipeline)")
    index = GraphIndex(build_graph(spec.fabric), spec.fabric, spec.gpu)
    spec.check_fabric(index.n_gpus)
    ranks = representative_ranks(lay)
    net = FlowNetwork(simpy.Environment(), index.router(ranks),
                      batch_window_rel=spec.fabric.batch_window_rel, record_timeline=False)
    world = lay.world_size
    st = FastState(spec, fast_plan(spec, routing_draws), spec.ops(), net,
                   np.zeros((world, len(CATEGORIES))), np.full(world, np.nan),
                   np.full(world, np.nan), index=index)
    simulate_ranks(st, ranks)
    return st, ranks


def run_fast_step(spec: StepSpec, routing_draws: int | None = None) -> StepResult:
    """Fast-mode :class:`StepResult` of ``spec`` (module docstring for what it assumes).

    Python's cyclic garbage collector is paused while it runs (and restored after): its
    passes over the many short-lived SimPy / engine objects took about 40 % of the wall time
    at 9,216 GPUs (3.4 s -> 1.9 s on repeated calls); nothing is freed later than the next
    collection after the call.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        st, ranks = simulate_fast(spec, routing_draws)
        return summarise(spec, st, ranks, "fast")
    finally:
        if was_enabled:
            gc.enable()
