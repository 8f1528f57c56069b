"""Fast mode: one representative pipeline; what spans replicas is solved for all of them at once.

Full mode (:func:`moesim.step.simulate.simulate_step`) runs every rank. Fast mode assumes every
DP replica behaves alike and runs only the ranks with dense-grid ``dp == 0`` (every pipeline
stage, with their TP / CP ranks), with :func:`moesim.step.program.rank_program` unchanged.
Every collective is still max-min flows on the whole fabric, but each flow stands for its
identical copies (:mod:`moesim.engine.copies`: exact when the copies are images of each other
under a symmetry of the fabric and its routes; otherwise every copy runs at the slowest
copy's rate):

* the representative's pipeline sends and TP / CP collectives: flows whose copies are the same
  flow in every DP replica (:func:`replica_router`);
* each EP all-to-all phase (layer, direction): the traffic of every EP group of the stage at
  once, solved from the group's reference time (:class:`moesim.step.phases.A2APhases`);
  member ``e`` releases its row ``o_e`` after ``t_sync`` (``experts_fwd[e]`` x its slowdown
  before ``combine``, ``experts_bwd[e]`` before ``dispatch_bwd``, 0 before ``dispatch`` /
  ``combine_bwd``), where ``t_sync`` is when the members last left an all-to-all together;
  members leave every all-to-all together, at its last byte (the engine lets each receiver go
  when its own bytes are in: full mode's early receivers start their next compute sooner);
* DP / EDP ring reduce-scatters and all-gathers: every ring of the stage at once, as flows on
  the step's clock beside the pipeline sends (:class:`moesim.step.phases.RingPhases`).

Routes are computed on the sub-fabric of the stages involved where that gives the whole
fabric's links (D-mod-K, spray: :class:`moesim.fabric.blocks.BlockRouter`), else on the whole
fabric (ECMP, PXN). ``StepResult.top_link`` names the link the last rank waited on most
(each all-to-all wait charged to its phase's busiest link, its gradient-ring waits to its
stage's busiest ring link), as full mode's critical path names one.

Not seen: all-to-all traffic beside other traffic (another stage's, a gradient ring's, a
pipeline send's): phases are solved alone; members that reach an all-to-all at different
times for reasons outside the representative (a replica's pipeline input held up by
congestion); a slow GPU outside the representative pipeline. Measured against full mode on
oversubscribed rail fabrics: ``tests/test_step_congestion.py`` and the README.
``routing_draws = R`` reuses the routing of the first ``R`` MoE layers cyclically (a stationary
router); ``None`` draws every layer as full mode does.

MoE layers of the representative run as one timeout each when nothing in them is a flow
(:func:`moesim.step.program._fused_moe`), and lone pipeline sends skip the rate solver
(:mod:`moesim.engine.solo`). Wall time: ``benchmarks/bench_step.py``.

Not supported: expert-TP groups outside the pipeline (``etp`` other than 1 or ``tp``);
the critical-path walk (its all-to-alls have no flows).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import simpy

from moesim.collectives.alltoall import AllToAll
from moesim.engine.copies import CopiesRouter
from moesim.engine.network import FlowNetwork
from moesim.engine.routing import Router
from moesim.errors import ConfigError
from moesim.fabric.build import build_graph
from moesim.fabric.subfabric import GraphIndex
from moesim.parallel.layout import ParallelLayout
from moesim.router import RoutingResult
from moesim.step.groups import ring_group
from moesim.step.phases import A2APhases, RingPhases, base_router
from moesim.step.plan import LayerPlan, Route, StepPlan, build_plan, route_layer
from moesim.step.simulate import simulate_ranks
from moesim.step.spec import StepSpec
from moesim.step.state import CATEGORIES, StepState

RELEASE = {"combine": "experts_fwd", "dispatch_bwd": "experts_bwd"}
"""All-to-all phase -> the per-EP-rank compute its members run just before sending."""


@dataclass
class FastAllToAll(AllToAll):
    """An all-to-all whose members all finish at the estimated time (no flows)."""

    offsets_s: np.ndarray = field(kw_only=True)  # members' release offsets
    end_s: float = field(kw_only=True)  # last arrival, from the reference time (A2APhases)

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
    """StepState whose cross-replica collectives are whole-stage phases (module docstring)."""

    index: GraphIndex = field(kw_only=True)
    a2a_phases: A2APhases = field(kw_only=True)
    ring_phases: RingPhases = field(kw_only=True)
    base: Router = field(kw_only=True)  # whole-fabric routes (phases.base_router)
    stage_groups: dict[tuple[str, int], list[tuple[int, ...]]] = field(default_factory=dict)
    a2a_timing: dict[tuple[int, int, str], tuple[np.ndarray, float, str]] = field(
        default_factory=dict)  # (group, layer, phase) -> (release offsets, end, bottleneck)
    group_gpus: dict[int, np.ndarray] = field(default_factory=dict)  # EP group (1st rank) -> GPUs
    release_s: dict[tuple[int, str, int], np.ndarray] = field(default_factory=dict)  # _offsets
    link_wait_s: dict[int, dict[str, float]] = field(default_factory=dict)  # rank -> link -> s

    def all_to_all(self, rank: int, layer: LayerPlan, mb: int, phase: str) -> AllToAll:
        key = (self.ep_group[rank][0], layer.index, mb, phase)
        a2a = self.a2a.get(key)
        if a2a is None:
            gpus = self._group_gpus(rank)
            offsets, end_s, _ = self._a2a_time(rank, gpus, layer, phase)
            a2a = self.a2a[key] = FastAllToAll(self.net, gpus, layer.a2a_bytes[phase],
                                               len(self.a2a), offsets_s=offsets, end_s=end_s)
        return a2a

    def sent_a2a(self, a2a: AllToAll, local: int, layer: int, phase: str) -> None:
        super().sent_a2a(a2a, local, layer, phase)
        if isinstance(a2a, FastAllToAll) and not a2a._sent:
            rank = int(a2a.gpus[local])
            _, end_s, link = self._a2a_time(rank, a2a.gpus, self.plan.layers[layer], phase)
            self._book_link(rank, link, end_s - float(a2a.offsets_s[local]))

    def a2a_arrival_s(self, rank: int, layer: LayerPlan, mb: int, phase: str,
                      send_s: float) -> float:
        """:meth:`FastAllToAll.send` and its wake-up without the events: ``rank``'s send at
        ``send_s`` fixes the group's reference time (it is the group's one simulated member:
        the layouts :func:`moesim.step.program._fusable` admits)."""
        offsets, end_s, link = self._a2a_time(rank, self._group_gpus(rank), layer, phase)
        arrival = send_s - float(offsets[self.coords[rank]["ep"]]) + end_s
        self._book_link(rank, link, arrival - send_s)
        return arrival

    def _book_link(self, rank: int, link: str, wait_s: float) -> None:
        """Charge ``wait_s`` (if positive) of ``rank``'s waiting to bottleneck ``link``."""
        self._charge(self.link_wait_s.setdefault(rank, {}), link, wait_s)

    def top_link(self, rank: int) -> str:
        """The link ``rank`` waited on most: each all-to-all wait charged to its phase's
        busiest link, its exposed gradient-ring waits (``dp_exposed``) to the busiest link of
        its stage's ring traffic (:mod:`moesim.step.phases`)."""
        per = dict(self.link_wait_s.get(rank, {}))
        dp_wait = float(self.time_s[rank, CATEGORIES.index("dp_exposed")])
        self._charge(per, self.ring_phases.busiest_name(self._stage(rank)), dp_wait)
        return max(per, key=per.__getitem__) if per else ""

    @staticmethod
    def _charge(per: dict[str, float], link: str, wait_s: float) -> None:
        if link and wait_s > 0:
            per[link] = per.get(link, 0.0) + wait_s

    def _group_gpus(self, rank: int) -> np.ndarray:
        """The GPUs of ``rank``'s EP group, as one array per group."""
        first = self.ep_group[rank][0]
        gpus = self.group_gpus.get(first)
        if gpus is None:
            gpus = self.group_gpus[first] = np.asarray(self.ep_group[rank], dtype=np.int64)
        return gpus

    def _stage(self, rank: int) -> int:
        return rank // (self.spec.layout.world_size // self.spec.layout.pp)

    def _groups_of(self, kind: str, stage: int) -> list[tuple[int, ...]]:
        """Every ``kind`` group of ``stage`` ("ep", or a gradient ring "dp" / "edp")."""
        key = (kind, stage)
        if key not in self.stage_groups:
            per = self.spec.layout.world_size // self.spec.layout.pp
            lay, found = self.spec.layout, {}
            for r in range(stage * per, (stage + 1) * per):
                g = self.ep_group[r] if kind == "ep" else ring_group(lay, kind, r)
                found.setdefault(g[0], g)
            self.stage_groups[key] = list(found.values())
        return self.stage_groups[key]

    def _a2a_time(self, rank: int, gpus: np.ndarray, layer: LayerPlan, phase: str
                  ) -> tuple[np.ndarray, float, str]:
        """(release offsets, end, bottleneck link name) of ``phase`` of ``layer`` in the EP
        group ``gpus``, solved with every EP group of its stage (:class:`A2APhases`)."""
        key = (int(gpus[0]), layer.index, phase)
        timing = self.a2a_timing.get(key)
        if timing is None:
            stage = self._stage(rank)
            offsets = self._offsets(layer, phase, gpus)
            groups = np.array(self._groups_of("ep", stage), dtype=np.int64)
            end_s, link = self.a2a_phases.time_s(stage, self.base, groups,
                                                 layer.a2a_bytes[phase], offsets)
            name = self.base.fabric.link_name(link) if link >= 0 else ""
            timing = self.a2a_timing[key] = (offsets, end_s, name)
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

    def join_ring(self, rank: int, kind: str, item: int, size_bytes: float) -> simpy.Event:
        """Every ``kind`` ring of ``rank``'s stage at once (:class:`RingPhases`)."""
        stage = self._stage(rank)
        rings = self._groups_of(kind.split("_")[0], stage)
        return self.ring_phases.join(kind, stage, item, size_bytes, rings)


def replica_router(base: Router, lay: ParallelLayout, ranks: list[int]) -> CopiesRouter:
    """Routes for the representative pipeline's flows, each standing for its copies in every
    DP replica (:class:`CopiesRouter`: the rank with the same tp, cp and pp and dp = c)."""
    members = np.array([[lay.dense_rank(tp=c["tp"], cp=c["cp"], dp=d, pp=c["pp"])
                         for c in (lay.coords(r) for r in ranks)] for d in range(lay.dp)],
                       dtype=np.int64)
    endpoint_of = np.full(lay.world_size, -1, dtype=np.int64)
    endpoint_of[ranks] = np.arange(len(ranks))
    return CopiesRouter(base, members, endpoint_of)


def representative_ranks(lay: ParallelLayout) -> list[int]:
    """The ranks of dense-grid ``dp == 0``: every stage, TP and CP rank of one pipeline."""
    return sorted(lay.dense_rank(tp=t, cp=c, dp=0, pp=p)
                  for p in range(lay.pp) for c in range(lay.cp) for t in range(lay.tp))


def reused_routing(spec: StepSpec, draws: int | None) -> Route:
    """A ``route`` for :func:`moesim.step.plan.build_plan` under which MoE layer k (in model
    order) takes the routing of MoE layer k mod ``draws`` (drawn once; layers that share a
    routing share its cost table too); ``None``: every layer drawn (:func:`route_layer`)."""
    if draws is None:
        return route_layer
    moe = [i for i, is_moe in enumerate(spec.model.moe_layers) if is_moe]
    source = {layer: moe[k % draws] for k, layer in enumerate(moe)}
    drawn: dict[int, RoutingResult] = {}

    def reused(s: StepSpec, layer: int) -> RoutingResult:
        first = source.get(layer, layer)
        if first not in drawn:
            drawn[first] = route_layer(s, first)
        return drawn[first]

    return reused


def fast_plan(spec: StepSpec, routing_draws: int | None = None) -> StepPlan:
    """:func:`moesim.step.plan.build_plan` with ``routing_draws`` distinct routings."""
    return build_plan(spec, reused_routing(spec, routing_draws))


def simulate_fast(spec: StepSpec, routing_draws: int | None = None, *,
                  fuse_moe: bool = True) -> tuple[FastState, list[int]]:
    """Run the representative pipeline of ``spec``; (finished state, its ranks)."""
    lay = spec.layout
    if lay.etp > 1 and lay.etp != lay.tp:
        raise ConfigError("layout.etp", "fast mode needs etp == 1 or etp == tp (expert-TP "
                          "groups inside the representative pipeline)")
    index = GraphIndex(build_graph(spec.fabric), spec.fabric, spec.gpu)
    spec.check_fabric(index.n_gpus, index.graph.graph.get("nvlink_domain_size"))
    ranks = representative_ranks(lay)
    base = base_router(index, lay.world_size // lay.pp)
    env, eps = simpy.Environment(), spec.fabric.batch_window_rel
    net = FlowNetwork(env, replica_router(base, lay, ranks), batch_window_rel=eps,
                      record_timeline=False)
    world = lay.world_size
    st = FastState(spec, fast_plan(spec, routing_draws), spec.ops(), net,
                   np.zeros((world, len(CATEGORIES))), np.full(world, np.nan),
                   np.full(world, np.nan), index=index, analytic_a2a=fuse_moe,
                   a2a_phases=A2APhases(eps), ring_phases=RingPhases(net), base=base)
    simulate_ranks(st, ranks)
    return st, ranks
