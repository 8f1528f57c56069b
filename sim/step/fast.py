"""Fast mode: simulate one representative pipeline and time what spans replicas by estimate.

Full mode (:func:`moesim.step.run.simulate_step`) runs every rank. Fast mode assumes every DP
replica behaves alike and runs only the ranks with dense-grid ``dp == 0`` (every pipeline
stage, with their TP / CP ranks), with :func:`moesim.step.program.rank_program` unchanged, on
the sub-fabric of their hosts (:mod:`moesim.fabric.subfabric`): pipeline sends and TP / CP
collectives are real flows. What spans replicas is timed by :mod:`moesim.step.estimate`:

* an EP all-to-all completes, for every member, at ``t_sync + A2ATimer.time_s`` where
  ``t_sync`` is when the members last left an all-to-all together (the representative's send
  time minus its own release offset) and member ``e`` releases its row ``o_e`` later:
  ``experts_fwd[e]`` (x its slowdown) before ``combine``, ``experts_bwd[e]`` before
  ``dispatch_bwd``, 0 before ``dispatch`` / ``combine_bwd``. So a hot expert rank still
  delays the representative, but members leave every all-to-all together (the engine lets
  each receiver go when its own bytes are in);
* DP / EDP ring reduce-scatters and all-gathers: :class:`moesim.step.estimate.RingTimer`;
  with ``replicas`` (``Fast()`` on a 1:1 ECMP fabric) the representative's flows stand for
  every replica's copies (:mod:`moesim.step.replicas`) and the rings are flows beside them
  (:mod:`moesim.step.ringflows`).

Not seen by fast mode, by design: anything that breaks the symmetry outside the
representative pipeline (a degraded link or slow GPU of another replica; tested: full mode
slows down, fast mode does not), and contention between different replicas' traffic beyond
what the estimates count. ``routing_draws = R`` reuses the routing of the first ``R`` MoE
layers cyclically (a stationary router; drawing one routing costs about 0.1 s at EP64 with
4096 tokens per rank); ``None`` draws every layer as full mode does.

Speed (benchmarks/bench_step.py): MoE layers of the representative run as one timeout each
when nothing in them is a flow (:func:`moesim.step.program._fused_moe`), lone pipeline sends
skip the rate solver (:mod:`moesim.engine.solo`).

Measured (tests/test_step_fast.py): 32 GPUs (rail, 8 hosts x 4 H100), mixtral-shaped 4
layers, EP8 over 2 hosts, PP2, DP16, 3 micro-batches: fast 3.2 % below full (full 70.0 ms,
fast 67.7 ms; 2 micro-batches: 3.7 %); with host 3's gpu1-nic1 link at 25 % (a replica
that is not the representative): full +54 %, fast unchanged. The sub-fabric keeps D-mod-K
routes identical, so the representative's own flows match full mode's.

At scale (2026-12-03; chunked rings in step order): 128 GPUs (16 H800 hosts of
``rail-h200-4096``), moe-1t cut to 4 layers, PP2 EP64 DP64, 2 micro-batches: fast 585.6 ms,
full 592.0 ms (-1.1 %); 1,024 GPUs, 16 layers, PP16, 1 micro-batch (bench_step.py --layers
16 --microbatches 1): fast 1.092 s, full 1.176 s (-7.1 %, not traced).

Not supported: expert-TP groups outside the pipeline (``etp`` other than 1 or ``tp``);
the critical-path walk (its all-to-alls have no flows).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
import simpy

from moesim.collectives.alltoall import AllToAll
from moesim.collectives.fused_ring import FusedRing, ring_edges
from moesim.collectives.ring import RingCollective
from moesim.engine.copies import CopiesRouter
from moesim.engine.network import FlowNetwork
from moesim.engine.routing import Router
from moesim.errors import ConfigError
from moesim.fabric.build import build_table
from moesim.fabric.subfabric import GraphIndex, MappedRouter
from moesim.parallel.layout import ParallelLayout
from moesim.schedule.ops import ScheduleOps
from moesim.step.estimate import A2ATimer, RingPairs, RingTimer, stage_ring_timer, stage_wide_rings
from moesim.step.fast_routes import HostRoutesAhead, host_router
from moesim.step.fused_layer import FusedLayer, LinkClock, NotAlone, StageGroups, fusion
from moesim.step.plan import LayerPlan, Route, StepPlan, build_plan
from moesim.step.replicas import pipeline_router, plain_router
from moesim.step.routing_ahead import RoutingAhead
from moesim.step.simulate import simulate_ranks
from moesim.step.spec import StepSpec
from moesim.step.state import CATEGORIES, StepState

if TYPE_CHECKING:  # imported by _run where it runs (with ringjob)
    from moesim.step.ringflows import RingFlows

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
    fuse_tp: bool = field(default=False, kw_only=True)  # tp_ring in closed form
    fuse_layers: bool = field(default=False, kw_only=True)  # TP / CP layers: fused_layer
    link_clock: LinkClock | None = None  # their NVLink transfers (moesim.step.fused_layer)
    stages: dict[int, StageGroups] = field(default_factory=dict)  # pp -> its members
    layer_groups: dict[tuple[int, int, int, bool], FusedLayer] = field(default_factory=dict)
    ring_edges: dict[tuple[int, ...], tuple[np.ndarray, np.ndarray]] = field(
        default_factory=dict)  # TP / ETP group -> fused_ring.ring_edges
    a2a_timers: dict[int, A2ATimer] = field(default_factory=dict)
    ring_timers: dict[int, RingTimer] = field(default_factory=dict)  # host, or -1 - stage
    ring_flows: RingFlows | None = None  # with replicas (join_ring)
    host_routers: dict[int, MappedRouter] = field(default_factory=dict)
    host_rings: dict[int, RingPairs] = field(default_factory=dict)
    ahead: HostRoutesAhead | None = field(default=None, kw_only=True)  # fast_routes.py
    a2a_timing: dict[tuple[int, int, str], tuple[np.ndarray, float]] = field(
        default_factory=dict)  # (group, layer, phase) -> (release offsets, end)
    group_gpus: dict[int, np.ndarray] = field(default_factory=dict)  # EP group (1st rank) -> GPUs
    release_s: dict[tuple[int, str, int], np.ndarray] = field(default_factory=dict)  # _offsets
    arrival: dict[tuple[int, int, str], tuple[float, float]] = field(default_factory=dict)

    def all_to_all(self, rank: int, layer: LayerPlan, mb: int, phase: str) -> AllToAll:
        key = (self.ep_group[rank][0], layer.index, mb, phase)
        a2a = self.a2a.get(key)
        if a2a is None:
            gpus = self._group_gpus(rank)
            offsets, end_s = self._a2a_time(rank, gpus, layer, phase)
            a2a = self.a2a[key] = FastAllToAll(self.net, gpus, layer.a2a_bytes[phase],
                                               len(self.a2a), offsets_s=offsets, end_s=end_s)
        return a2a

    def a2a_arrival_s(self, rank: int, layer: LayerPlan, mb: int, phase: str,
                      send_s: float) -> float:
        """:meth:`FastAllToAll.send` and its wake-up without the events: ``rank``'s send at
        ``send_s`` fixes the group's reference time (it is the group's one simulated member:
        the layouts :func:`moesim.step.program._fusable` admits)."""
        key = (rank, layer.index, phase)
        known = self.arrival.get(key)
        if known is None:  # (rank's release offset, end): the same every micro-batch
            offsets, end_s = self._a2a_time(rank, self._group_gpus(rank), layer, phase)
            known = self.arrival[key] = (float(offsets[self.coords[rank]["ep"]]), end_s)
        return send_s - known[0] + known[1]

    def _group_gpus(self, rank: int) -> np.ndarray:
        """The GPUs of ``rank``'s EP group, as one array per group."""
        first = self.ep_group[rank][0]
        gpus = self.group_gpus.get(first)
        if gpus is None:
            gpus = self.group_gpus[first] = np.asarray(self.ep_group[rank], dtype=np.int64)
        return gpus

    def _a2a_time(self, rank: int, gpus: np.ndarray, layer: LayerPlan, phase: str
                  ) -> tuple[np.ndarray, float]:
        """(release offsets, end) of ``phase`` of ``layer`` in the EP group ``gpus``."""
        key = (int(gpus[0]), layer.index, phase)
        timing = self.a2a_timing.get(key)
        if timing is None:
            timer = self.a2a_timers.get(key[0])
            if timer is None and self.ahead is not None:
                timer = self.ahead.timer(key[0])
            if timer is None:
                host = self._host_router(rank)
                # another rep rank's group on the host: the pipeline's sub-fabric holds them all
                router: Router = (host if (host.local_of[gpus] >= 0).all()
                                  else plain_router(self.net.router))
                timer = A2ATimer(router, gpus)
            self.a2a_timers[key[0]] = timer
            offsets = self._offsets(layer, phase, gpus)
            timing = self.a2a_timing[key] = (offsets,
                                             timer.time_s(layer.a2a_bytes[phase], offsets))
        return timing

    def _offsets(self, layer: LayerPlan, phase: str, gpus: np.ndarray) -> np.ndarray:
        """Members' release offsets (one array per group, phase and cost table: MoE layers
        that share their costs, as under ``routing_draws``, share it)."""
        if phase not in RELEASE or layer.moe is None:
            return np.zeros(gpus.size)
        key = (int(gpus[0]), phase, id(layer.moe))  # the plan keeps layer.moe alive
        if key not in self.release_s:
            per_rank = np.asarray(getattr(layer.moe, RELEASE[phase]), dtype=float)
            self.release_s[key] = per_rank * self.slowdown[gpus]
        return self.release_s[key]

    def tp_ring(self, members: tuple[int, ...], size_bytes: float, kind: str
                ) -> RingCollective | FusedRing:
        """TP / ETP rings in closed form (:class:`FusedRing`) where they have their links to
        themselves (``fuse_tp``: :func:`rings_alone`), else as flows."""
        if self.fuse_tp:
            edges = self.ring_edges.get(members)
            if edges is None:
                edges = self.ring_edges[members] = ring_edges(self.net.router, members)
            return FusedRing(self.env, edges, members, size_bytes)
        return super().tp_ring(members, size_bytes, kind)

    def fused_layer(self, rank: int, layer: LayerPlan, mb: int, backward: bool
                    ) -> simpy.Event | None:
        """With ``fuse_layers``: the stage's TP / CP members through ``layer`` in closed form
        (:class:`moesim.step.fused_layer.FusedLayer`); the event fires when ``rank`` is done
        (its ledger booked). None: the layer runs op by op."""
        if not self.fuse_layers:
            return None
        stage = self.coords[rank]["pp"]
        key = (stage, layer.index, mb, backward)
        fused = self.layer_groups.get(key)
        if fused is None:
            if self.link_clock is None:
                self.link_clock = LinkClock(self.net.router)
            if stage not in self.stages:
                lay = self.spec.layout
                self.stages[stage] = StageGroups(self, sorted(
                    lay.dense_rank(tp=t, cp=c, dp=0, pp=stage)
                    for c in range(lay.cp) for t in range(lay.tp)), self.link_clock)
            groups = self.stages[stage]
            fused = self.layer_groups[key] = FusedLayer(self, groups, layer, mb, backward)
        local = int(np.searchsorted(fused.g.members, rank))
        fused.start_rank(local)
        if not fused.waiting:
            del self.layer_groups[key]
        return fused.rank_done[local]

    def join_ring(self, rank: int, kind: str, item: int, size_bytes: float) -> simpy.Event:
        """Every ``kind`` ring of ``rank``'s stage at once: as flows with ``replicas``
        (:class:`RingFlows`), else timed over every ring edge of the stage under ECMP and
        over ``rank``'s host's elsewhere (:func:`stage_wide_rings`)."""
        if self.ring_flows is not None:
            return self.ring_flows.join(kind, self.coords[rank]["pp"], item, size_bytes)
        wide = stage_wide_rings(self.index.spec)
        key = -1 - self.coords[rank]["pp"] if wide else self.index.host_of(rank)
        if key not in self.ring_timers:
            self.ring_timers[key] = stage_ring_timer(
                self.env, self.index, self.spec.layout, -1 - key) if wide else RingTimer(
                self.env, self._host_router(rank), self.host_rings[key])
        return self.ring_timers[key].join(kind, item, size_bytes)

    def begin_tail(self, rank: int, opt_s: float, gathers: list[tuple[str, float]]) -> None:
        if self.ring_flows is not None:  # each rank of the stage on its own clock
            self.ring_flows.begin_tail(self.coords[rank]["pp"], opt_s, gathers)

    def _host_router(self, rank: int) -> MappedRouter:
        """One sub-fabric per host of the pipeline: its ring pairs and ``rank``'s EP group
        (:func:`moesim.step.fast_routes.host_router`; built ahead where it can be)."""
        host = self.index.host_of(rank)
        if host not in self.host_routers:
            built = None if self.ahead is None else self.ahead.route(host)
            self.host_routers[host], self.host_rings[host] = built or host_router(
                self.index, self.spec, lambda g: self.coords[g]["pp"], self.ep_group[rank], rank)
        return self.host_routers[host]


def representative_ranks(lay: ParallelLayout) -> list[int]:
    """The ranks of dense-grid ``dp == 0``: every stage, TP and CP rank of one pipeline."""
    return sorted(lay.dense_rank(tp=t, cp=c, dp=0, pp=p)
                  for p in range(lay.pp) for c in range(lay.cp) for t in range(lay.tp))


def fast_plan(spec: StepSpec, routing_draws: int | None = None,
              route: Route | None = None) -> StepPlan:
    """:func:`moesim.step.plan.build_plan` with ``routing_draws`` distinct routings, drawn
    ahead in worker threads (:class:`moesim.step.routing_ahead.RoutingAhead`) unless ``route``
    is given."""
    if route is not None:
        return build_plan(spec, route)
    with RoutingAhead(spec, routing_draws) as ahead:
        return build_plan(spec, ahead)


def prepare(spec: StepSpec) -> tuple[GraphIndex, list[int]]:
    """Check that fast mode can run ``spec``; its fabric's index and representative ranks."""
    lay = spec.layout
    if lay.etp > 1 and lay.etp != lay.tp:
        raise ConfigError("layout.etp", "fast mode needs etp == 1 or etp == tp (expert-TP "
                          "groups inside the representative pipeline)")
    index = GraphIndex(build_table(spec.fabric), spec.fabric, spec.gpu)
    spec.check_fabric(index.n_gpus, index.graph.graph.get("nvlink_domain_size"))
    return index, representative_ranks(lay)


def empty_ledgers(world: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """StepState's time_s, end_s and last_op_s for ``world`` ranks, before the run."""
    return np.zeros((world, len(CATEGORIES))), np.full(world, np.nan), np.full(world, np.nan)


def simulate_fast(spec: StepSpec, routing_draws: int | None = None, *, fuse_moe: bool = True,
                  fuse_tp: bool = True, replicas: bool = False) -> tuple[FastState, list[int]]:
    """Run the representative pipeline of ``spec``; (finished state, its ranks). ``fuse_tp``:
    TP / CP layers (:func:`layers_fused`, with ``fuse_moe``) or else TP / ETP rings
    (:func:`rings_alone`) in closed form; off: every TP / CP transfer a flow. A closed form
    that finds two transfers on one link at once (:class:`NotAlone`) runs again with flows;
    CP sends that leave the stage's links are timed alone (:mod:`moesim.step.fused_apart`).
    MoE layers route ahead (:mod:`moesim.step.routing_ahead`; in worker threads if set).
    ``replicas``: flows as copies over every replica, rings as flows (module docstring)."""
    with RoutingAhead(spec, routing_draws) as route:
        return _simulate(spec, route, fuse_moe, fuse_tp, replicas)


def _simulate(spec: StepSpec, route: Route, fuse_moe: bool, fuse_tp: bool, replicas: bool
              ) -> tuple[FastState, list[int]]:
    index, ranks = prepare(spec)
    ops = spec.ops()
    router: Router = index.router(ranks)
    alone, layers, watch = fusion(spec, ops, index, router, fuse_tp and not replicas, fuse_moe)
    ahead = HostRoutesAhead(index, spec, ranks)
    if replicas:
        router = pipeline_router(index, spec.layout, ranks)
    try:
        return _run(spec, route, index, (ranks, router, ahead), ops, fuse_moe, alone, layers,
                    watch)
    except NotAlone:
        return _run(spec, route, index, (ranks, router, ahead), ops, fuse_moe, False, False)
    finally:
        ahead.cancel()


def _run(spec: StepSpec, route: Route, index: GraphIndex,
         ranks_router: tuple[list[int], Router, HostRoutesAhead], ops: ScheduleOps,
         fuse_moe: bool, rings: bool, layers: bool, watch: np.ndarray | None = None
         ) -> tuple[FastState, list[int]]:
    ranks, router, ahead = ranks_router
    net = FlowNetwork(simpy.Environment(), router,
                      batch_window_rel=spec.fabric.batch_window_rel, record_timeline=False)
    st = FastState(spec, fast_plan(spec, route=route), ops, net,
                   *empty_ledgers(spec.layout.world_size), index=index, analytic_a2a=fuse_moe,
                   fuse_tp=rings, fuse_layers=layers, ahead=ahead)
    if watch is not None:  # CP sends off the stage's links (moesim.step.fused_apart)
        st.link_clock = LinkClock(net.router, watch)
    if isinstance(net.router, CopiesRouter):  # replicas
        from moesim.step.ringflows import RingFlows  # (and RingJob) only where it is used

        st.ring_flows = RingFlows(net, spec.layout)
    simulate_ranks(st, ranks)
    return st, ranks
