"""Fast mode with whole-fabric phases (``Fast(phases="fabric")``): what spans replicas is solved
for all of them at once, so oversubscribed uplinks and spines show the contention full mode
shows.

The representative pipeline runs as in :mod:`moesim.step.fast`; every collective is max-min
flows on the whole fabric, each flow standing for its identical copies
(:mod:`moesim.engine.copies`: exact when the copies are images of each other under a symmetry
of the fabric and its routes; otherwise every copy runs at the slowest copy's rate):

* the representative's pipeline sends and TP / CP collectives: flows whose copies are the same
  flow in every DP replica (:func:`replica_router`);
* each EP all-to-all phase (layer, direction): every EP group of the stage at once, from the
  group's reference time with the members' release offsets (as :mod:`moesim.step.fast`),
  solved by the engine (:class:`moesim.step.phases.A2APhases`) where the old estimate took a
  link-load lower bound of the representative's group alone;
* DP / EDP ring reduce-scatters and all-gathers: every ring of the stage at once, as flows on
  the step's clock beside the pipeline sends (:class:`moesim.step.phases.RingPhases`), where
  the old estimate queued the host's rings FIFO (the DP ring beside the EDP ring ended ~2x
  early).

Routes are computed on the sub-fabric of the stages involved where that gives the whole
fabric's links (D-mod-K, spray: :class:`moesim.fabric.blocks.BlockRouter`), else on the whole
fabric (ECMP, PXN). ``StepResult.top_link`` names the link the last rank waited on most (each
all-to-all wait charged to its phase's busiest link, its gradient-ring waits to its stage's
busiest ring link), as full mode's critical path names one.

* under ECMP, each replica's pipeline input (:mod:`moesim.step.replica_inputs`; where
  replicas' sends collide, :func:`replicas_collide`): every phase leaves its
  flows on the step's clock; at a pass's first all-to-all each replica's copy of the pass's
  input send is timed on its own ECMP route beside the phase flows on its links then, starting
  when that replica left its sender's last all-to-all, and a member whose input comes after
  the representative's pass began releases that all-to-all later by the difference (under
  ECMP on a 4:1 fabric some replicas' sends stack on one uplink where the next micro-batch's
  all-to-all starves them: full mode's members send their first dispatch 30-50 ms apart).

Not seen: all-to-all traffic beside other traffic in the phase's own solve (a gradient ring's,
a pipeline send's: phases are solved alone); members that leave an all-to-all at their own
times (they leave together, at the latest member's time; only their pipeline sends start at
their own); a slow GPU outside the representative pipeline. Measured against full mode on
oversubscribed rail fabrics: ``tests/test_step_congestion.py`` and ``docs`` in the README.

Cost: an engine solve per distinct all-to-all phase (stages whose problems are the same up
to link names share one), so a step whose every MoE layer is routed differently pays one
per layer and direction: slower than the estimates (the README's benchmark notes).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import cast

import numpy as np
import simpy

from moesim.collectives.alltoall import AllToAll
from moesim.engine.network import FlowNetwork
from moesim.engine.routing import Router
from moesim.fabric.spec import FabricSpec
from moesim.fabric.subfabric import GraphIndex
from moesim.step.fast import (
    FastAllToAll,
    FastState,
    empty_ledgers,
    fast_plan,
    prepare,
    simulate_fast,
)
from moesim.step.groups import ring_group
from moesim.step.phases import A2APhases, RingPhases, base_router
from moesim.step.plan import LayerPlan
from moesim.step.replica_inputs import LinkRows, ReplicaInputs, late_end_s
from moesim.step.replicas import replica_router, replicas_collide
from moesim.step.ringjob import StageTail
from moesim.step.simulate import simulate_ranks
from moesim.step.spec import StepSpec
from moesim.step.state import CATEGORIES
from moesim.topologies.errors import TopologyError
from moesim.topologies.registry import read_preset


@dataclass
class PhasedState(FastState):
    """FastState whose cross-replica collectives are whole-stage phases (module docstring)."""

    a2a_phases: A2APhases = field(kw_only=True)
    ring_phases: RingPhases = field(kw_only=True)
    base: Router = field(kw_only=True)  # whole-fabric routes (phases.base_router)
    stage_groups: dict[tuple[str, int], list[tuple[int, ...]]] = field(default_factory=dict)
    a2a_rows: dict[int, tuple[LinkRows, np.ndarray, int]] = field(
        default_factory=dict)  # a2a tag -> its flows, members' arrivals, micro-batch
    exits: dict[tuple[int, str, int], np.ndarray] = field(
        default_factory=dict)  # (rank, pass kind, mb) -> members' last a2a arrivals
    a2a_link: dict[tuple[int, int, str], str] = field(default_factory=dict)  # busiest link
    link_wait_s: dict[int, dict[str, float]] = field(default_factory=dict)  # rank -> link -> s
    tails: dict[int, StageTail] = field(default_factory=dict)  # stage -> its ranks' DP tails
    inputs: ReplicaInputs | None = field(kw_only=True)  # each replica's input (under ECMP)
    arrived: dict[tuple[str, int, int, int], tuple[int, float, float]] = field(
        default_factory=dict)  # mailbox key -> (sender, send time, arrival of the copies)
    entered: dict[object, tuple[str, int, int, float]] = field(
        default_factory=dict)  # process -> the pass it entered and when, until its first a2a

    def mailbox(self, kind: str, mb: int, vstage: int, rank: int) -> simpy.Event:
        key = (kind, mb, vstage, rank)
        if key in self.mail:
            return self.mail[key]
        box = super().mailbox(kind, mb, vstage, rank)

        def got(ev: simpy.Event) -> None:  # before the receiver resumes (added first)
            sender, sent_s, _ = cast(tuple[int, float, int], ev.value)  # sends.send's
            self.arrived[key] = (int(sender), float(sent_s), self.env.now)

        box.callbacks.append(got)
        return box

    def enter_pass(self, kind: str, mb: int, vstage: int) -> None:
        super().enter_pass(kind, mb, vstage)
        self.entered[self.env.active_process] = (kind, mb, vstage, self.env.now)

    def _input_delays(self, rank: int) -> np.ndarray | None:
        """At the first all-to-all of ``rank``'s pass: how much later each EP rank's member
        gets the pass's pipeline input than ``rank``'s pass began, each replica's copy of the
        send on its own route beside the all-to-alls there (:mod:`moesim.step.replica_inputs`;
        the latest over the stage's EP groups, copies of one phase), sent when that replica
        got the last bytes of its sender's last all-to-all (:attr:`exits`; after the first
        member to get them, whose group's next phase starts with the representative's: the
        sender's ep rank is the receiver's); None without an input."""
        entry = self.entered.pop(self.env.active_process, None)
        got = None if entry is None else self.arrived.get((*entry[:3], rank))
        if entry is None or got is None or self.inputs is None:
            return None
        sender, sent_s, arrival_s = got
        groups = np.array(self._groups_of("ep", self._stage(rank)), dtype=np.int64)
        left = self.exits.get((sender, *entry[:2]))
        lag = np.zeros(groups.shape[1]) if left is None else left - left.min()
        at_s = self.inputs.arrivals_s(groups, self._stage(sender), sent_s + lag)
        late = np.maximum(at_s - max(entry[3], arrival_s), 0.0).max(axis=0)
        return late if late.any() else None

    def all_to_all(self, rank: int, layer: LayerPlan, mb: int, phase: str) -> AllToAll:
        key = (self.ep_group[rank][0], layer.index, mb, phase)
        a2a = self.a2a.get(key)
        if a2a is None:
            gpus = self._group_gpus(rank)
            own, offsets, end_s, rows, finish = self._phase(rank, gpus, layer, phase)
            ep = self.coords[rank]["ep"]  # the reference: rank's send less its own release
            a2a = self.a2a[key] = FastAllToAll(self.net, gpus, layer.a2a_bytes[phase],
                                               len(self.a2a), offsets_s=offsets - offsets[ep]
                                               + own[ep], end_s=end_s)
            self.a2a_rows[a2a.tag] = (rows, finish, mb)
        return a2a

    def sent_a2a(self, a2a: AllToAll, local: int, layer: int, phase: str) -> None:
        super().sent_a2a(a2a, local, layer, phase)
        if isinstance(a2a, FastAllToAll) and not a2a._sent:
            key = (int(a2a.gpus[0]), layer, phase)
            wait_s = a2a.end_s - float(a2a.offsets_s[local])
            self._book(int(a2a.gpus[local]), self.a2a_link.get(key, ""), wait_s)
            rows, finish, mb = self.a2a_rows.pop(a2a.tag)
            self._left(int(a2a.gpus[local]), phase, mb, rows, finish,
                       self.env.now - float(a2a.offsets_s[local]))

    def a2a_arrival_s(self, rank: int, layer: LayerPlan, mb: int, phase: str,
                      send_s: float) -> float:
        """``rank``'s send at ``send_s`` less its own release offset is the phase's reference
        time; members whose pipeline input came late release later (:meth:`_phase`)."""
        own, _, end_s, rows, finish = self._phase(rank, self._group_gpus(rank), layer, phase)
        ref_s = send_s - float(own[self.coords[rank]["ep"]])
        self._left(rank, phase, mb, rows, finish, ref_s)
        key = (self.ep_group[rank][0], layer.index, phase)
        self._book(rank, self.a2a_link.get(key, ""), ref_s + end_s - send_s)
        return ref_s + end_s

    def _left(self, rank: int, phase: str, mb: int, rows: LinkRows, finish: np.ndarray,
              ref_s: float) -> None:
        """A phase of ``rank``'s group ran from ``ref_s``: its flows load their links, and
        each member's last bytes arrive ``finish`` later (kept per pass: its sends start
        then, :meth:`_input_delays`)."""
        if self.inputs is not None:
            self.inputs.load.add(rows, ref_s)
        self.exits[(rank, "B" if phase.endswith("bwd") else "F", mb)] = ref_s + finish

    def _book(self, rank: int, link: str, wait_s: float) -> None:
        _charge(self.link_wait_s.setdefault(rank, {}), link, wait_s)

    def top_link(self, rank: int) -> str:
        """The link ``rank`` waited on most: each all-to-all wait charged to its phase's
        busiest link, its exposed gradient-ring waits (``dp_exposed``) to the busiest link of
        its stage's ring traffic (:mod:`moesim.step.phases`)."""
        per = dict(self.link_wait_s.get(rank, {}))
        dp_wait = float(self.time_s[rank, CATEGORIES.index("dp_exposed")])
        _charge(per, self.ring_phases.busiest_name(self._stage(rank)), dp_wait)
        return max(per, key=per.__getitem__) if per else ""

    def _stage(self, rank: int) -> int:
        return rank // (self.spec.layout.world_size // self.spec.layout.pp)

    def _groups_of(self, kind: str, stage: int) -> list[tuple[int, ...]]:
        """Every ``kind`` group of ``stage`` ("ep", or a gradient ring "dp" / "edp")."""
        key = (kind, stage)
        if key not in self.stage_groups:
            per = self.spec.layout.world_size // self.spec.layout.pp
            lay = self.spec.layout
            found: dict[int, tuple[int, ...]] = {}
            for r in range(stage * per, (stage + 1) * per):
                g = self.ep_group[r] if kind == "ep" else ring_group(lay, kind, r)
                found.setdefault(g[0], g)
            self.stage_groups[key] = list(found.values())
        return self.stage_groups[key]

    def _phase(self, rank: int, gpus: np.ndarray, layer: LayerPlan, phase: str
               ) -> tuple[np.ndarray, np.ndarray, float, LinkRows, np.ndarray]:
        """(members' own release offsets, the phase's offsets: those and how late each
        member's pipeline input came at the pass's first all-to-all, end, the phase's flows,
        each member's last arrival) of ``phase`` of ``layer`` in the EP group ``gpus``,
        solved with every EP group of its stage at their own offsets (:class:`A2APhases`:
        one solve per phase, shared by the micro-batches). Late members: their rows move
        later by their delays, and the phase ends no earlier than their bytes can cross the
        links from their releases (:func:`late_end_s`: what decides the end when the last
        member's input comes after the others' rows have drained, as full mode's do)."""
        own = self._offsets(layer, phase, gpus)
        late = self._input_delays(rank)
        stage = self._stage(rank)
        groups = np.array(self._groups_of("ep", stage), dtype=np.int64)
        end_s, link, rows, finish = self.a2a_phases.phase(stage, self.base, groups,
                                                          layer.a2a_bytes[phase], own)
        key = (int(gpus[0]), layer.index, phase)
        self.a2a_link[key] = self.base.fabric.link_name(link) if link >= 0 else ""
        if late is None:
            return own, own, end_s, rows, finish
        rows = rows.delayed(late)
        end_s = max(end_s, late_end_s(rows, own + late, self.base.fabric.cap_Bps))
        return own, own + late, end_s, rows, finish

    def join_ring(self, rank: int, kind: str, item: int, size_bytes: float) -> simpy.Event:
        """Every ``kind`` ring of ``rank``'s stage at once (:class:`RingPhases`); the event
        fires when every rank of the stage is done with it (the all-gathers of a tail begun
        by :meth:`begin_tail` are joined rank by rank there)."""
        stage = self._stage(rank)
        rings = self._groups_of(kind.split("_")[0], stage)
        return self.ring_phases.join(kind, stage, item, size_bytes, rings)

    def begin_tail(self, rank: int, opt_s: float, gathers: list[tuple[str, float]]) -> None:
        """Every rank of ``rank``'s stage starts its DP tail now (the replicas run the same
        program): each joins the all-gathers ``opt_s`` after its own reduce-scatters are
        done (:class:`moesim.step.ringjob.RingJob`: ranks behind a slow ring edge finish
        last), so the early ranks' all-gathers share links with the slow edge's tail."""
        stage = self._stage(rank)
        if stage in self.tails:
            return
        per = self.spec.layout.world_size // self.spec.layout.pp
        jobs = [job for (kind, st, _), job in self.ring_phases.jobs.items()
                if st == stage and kind.endswith("rs")]
        gathers_jobs = [self.ring_phases.job(kind, stage, -1, size, self._groups_of(
            kind.split("_")[0], stage), joined=False) for kind, size in gathers]
        self.tails[stage] = StageTail(self.env, stage * per, per, jobs, gathers_jobs, opt_s)


def _charge(per: dict[str, float], link: str, wait_s: float) -> None:
    if link and wait_s > 0:
        per[link] = per.get(link, 0.0) + wait_s


def simulate_phased(spec: StepSpec, routing_draws: int | None = None, *,
                    fuse_moe: bool = True) -> tuple[PhasedState, list[int]]:
    """:func:`moesim.step.fast.simulate_fast` with whole-fabric phases (module docstring)."""
    index, ranks = prepare(spec)
    lay, eps = spec.layout, spec.fabric.batch_window_rel
    base = base_router(index, lay.world_size // lay.pp)
    net = FlowNetwork(simpy.Environment(), replica_router(base, lay, ranks),
                      batch_window_rel=eps, record_timeline=False)
    plan = fast_plan(spec, routing_draws)
    st = PhasedState(spec, plan, spec.ops(), net, *empty_ledgers(lay.world_size), index=index,
                     analytic_a2a=fuse_moe, a2a_phases=A2APhases(eps),
                     ring_phases=RingPhases(net), base=base,
                     inputs=ReplicaInputs(base, lay.world_size // lay.pp, plan.act_bytes)
                     if replicas_collide(spec.fabric) else None)
    simulate_ranks(st, ranks)
    return st, ranks


def oversubscribed(index: GraphIndex) -> bool:
    """Whether a switch of the fabric (leaf, spine, core) takes in more bandwidth from the
    tiers below it than its links up can carry: where replicas' traffic can meet on an
    uplink (read from the fabric's link arrays)."""
    table = index._table  # the fabric's links as arrays, built once per index
    tier = index.node_tier
    bw = table.attr[:, 0]
    n = tier.size
    up_from = tier[table.dst] > tier[table.src]
    into = np.bincount(table.dst[up_from], weights=bw[up_from], minlength=n)
    out = np.bincount(table.src[up_from], weights=bw[up_from], minlength=n)
    switch = (tier > 0) & (out > 0)
    return bool((into[switch] > out[switch] * (1 + 1e-9)).any())


def declares_oversubscription(fabric: FabricSpec) -> bool:
    """Whether ``fabric``'s preset, with the spec's params over its own, sets a leaf or spine
    oversubscription above 1 (every builder's knob for uplinks narrower than downlinks): the
    test of ``Fast(phases="auto")``, read without building the fabric (route's start-up
    overlaps that build with routing). Agrees with :func:`oversubscribed` on the shipped
    presets (``tests/test_step_congestion.py``)."""
    try:
        params = {**read_preset(fabric.preset).get("params", {}), **dict(fabric.params)}
    except TopologyError:
        return False
    return any(str(k).endswith("oversubscription") and float(v) > 1.0
               for k, v in params.items() if isinstance(v, int | float))


def simulate_auto(spec: StepSpec, routing_draws: int | None = None, *, fuse_moe: bool = True,
                  fuse_tp: bool = True) -> tuple[FastState, list[int]]:
    """Whole-fabric phases (:func:`simulate_phased`) on a fabric that
    :func:`declares_oversubscription`, the estimates (:func:`simulate_fast`) elsewhere, with
    the representative's flows standing for every replica's copies and the gradient rings as
    flows where replicas' flows collide (:func:`moesim.step.replicas.replicas_collide`)."""
    if declares_oversubscription(spec.fabric):
        return simulate_phased(spec, routing_draws, fuse_moe=fuse_moe)
    return simulate_fast(spec, routing_draws, fuse_moe=fuse_moe, fuse_tp=fuse_tp,
                         replicas=replicas_collide(spec.fabric))
