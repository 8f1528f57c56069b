"""State shared by every rank program of a step, and the constants of the DP tail.

Collectives are created lazily and keyed so that every member of a group gets the same
object: all-to-alls by (EP group, layer, micro-batch, phase), ring collectives by (kind,
group, item), pipeline inputs by (pass kind, micro-batch, virtual stage, receiving rank).
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass, field
from typing import TypeVar

import numpy as np
import simpy

from moesim.calibration import OPTIMIZER_STEP_BYTES_PER_PARAM, OVERLAP_DISPATCHER_SMS
from moesim.collectives.alltoall import AllToAll
from moesim.collectives.fused_ring import FusedRing
from moesim.collectives.ring import RingCollective, ring_all_gather, ring_reduce_scatter
from moesim.engine.network import FlowNetwork
from moesim.schedule.ops import ScheduleOps, StageCommits
from moesim.schedule.placement import Placement
from moesim.schedule.registry import get_schedule
from moesim.step.groups import ring_group
from moesim.step.plan import LayerPlan, StepPlan
from moesim.step.spec import GRAD_REDUCE_BYTES, StepSpec

TP_TAG = -2  # flow tag of the TP all-gathers / reduce-scatters (moesim.step.tpcp)

CATEGORIES = ("compute", "a2a_exposed", "tp_exposed", "bubble", "dp_exposed", "optimizer",
              "cp_exposed")
PARAM_BYTES = 2  # bf16 parameters all-gathered after the step
OPTIMIZER_BYTES_PER_PARAM = OPTIMIZER_STEP_BYTES_PER_PARAM  # moesim.calibration

Generated = Generator[simpy.Event, object, None]
Where = tuple[str, int, int, int, str]
"""What a rank program is running: (pass kind, micro-batch, virtual stage, layer of its last
all-to-all or -1, that all-to-all's phase or "")."""
Span = tuple[int, float, float, str, object, Where | None, object, object]
"""(rank, t0, t1, category, lane = its SimPy process, what, for a wait the all-to-all or else
the event waited on (None for compute), the value the event fired with)."""


Row = TypeVar("Row")


class RankRows(dict[int, Row]):
    """A list of ``world`` per-rank rows, each made by ``make(rank)`` when first read: fast
    mode runs one pipeline of a world of thousands of ranks (9,216 GPUs: a SimPy resource
    and a coordinate dict per rank cost ~55 ms before the run, for the 16 it reads). Reads
    of a made row are a dict lookup; ``len`` and iteration are the whole list's (iterating
    makes every row)."""

    def __init__(self, world: int, make: Callable[[int], Row]) -> None:
        super().__init__()
        self.world, self.make = world, make

    def __missing__(self, rank: int) -> Row:
        if not 0 <= rank < self.world:
            raise IndexError(f"rank {rank} outside 0..{self.world - 1}")
        row = self[rank] = self.make(rank)
        return row

    def __len__(self) -> int:
        return self.world

    def __iter__(self) -> Iterator[Row]:  # type: ignore[override]  # rows, as a list's
        return (self[r] for r in range(self.world))


@dataclass
class StepState:
    """Shared by every rank program: collectives keyed so that all members share one object."""

    spec: StepSpec
    plan: StepPlan
    ops: ScheduleOps
    net: FlowNetwork
    time_s: np.ndarray  # [rank, category]
    end_s: np.ndarray  # [rank]: finish time
    last_op_s: np.ndarray  # [rank]: end of the rank's last schedule op
    a2a: dict[tuple[int, int, int, str], AllToAll] = field(default_factory=dict)
    mail: dict[tuple[str, int, int, int], simpy.Event] = field(default_factory=dict)
    rings: dict[tuple[str, int, int], RingCollective] = field(default_factory=dict)
    b_count: dict[tuple[int, int], int] = field(default_factory=dict)  # (rank, vstage) -> B done
    w_count: dict[tuple[int, int], int] = field(default_factory=dict)  # (rank, vstage) -> passes
    # that computed its weight gradients (B, or W when deferred): moesim.step.program
    op_kind_s: dict[int, dict[str, float]] = field(default_factory=dict)  # rank -> op kind ->
    # seconds in ops of that kind less their waits for pipeline inputs (moesim.step.program)
    tp_rings: dict[tuple[object, ...], RingCollective | FusedRing] = field(
        default_factory=dict)  # tpcp.py
    cp_mail: dict[tuple[object, ...], simpy.Event] = field(default_factory=dict)  # tpcp.py
    # Recording for moesim.step.critical (the critical-path walk):
    spans: list[Span] = field(default_factory=list)  # every compute and wait span
    cursor: dict[object, Where] = field(default_factory=dict)  # SimPy process -> what it runs
    a2a_send_s: dict[int, np.ndarray] = field(default_factory=dict)  # a2a tag -> member sends
    pending: list[list[simpy.Event]] = field(init=False)  # per rank: its reduce-scatters
    coords: RankRows[dict[str, int]] = field(init=False)  # [rank]: its layout coordinates
    ep_group: list[tuple[int, ...]] = field(init=False)
    slowdown: np.ndarray = field(init=False)  # [rank]: factor on its compute
    ledger: list[np.ndarray] = field(init=False)  # [rank]: where its times are booked now
    time_s_row: list[np.ndarray] = field(init=False)  # [rank]: views of time_s
    gpu: RankRows[simpy.Resource] = field(init=False)  # [rank]: its compute, for FB overlap
    analytic_a2a: bool = field(default=False, kw_only=True)  # a2a_arrival_s answers without
    # events (fast mode's states; moesim.step.program fuses MoE layers then)
    overlap_compute_factor: float = field(init=False)  # compute inside an FB op (program.py)
    place: Placement = field(init=False)  # the schedule's chunk -> stage map
    commits: tuple[StageCommits, ...] | None = field(init=False)  # per stage: the transfers
    # each op's commit posts, where the schedule batches them (DualPipe); moesim.step.sends
    posted: dict[tuple[str, int, int, int], int] = field(default_factory=dict)  # transfer ->
    # sides posted so far (batched sends: it starts when both are)

    def __post_init__(self) -> None:
        lay = self.spec.layout
        self.coords = RankRows(lay.world_size, lay.coords)
        ep_of = {r: g for g in lay.groups("ep") for r in g}  # one pass (9,216 ranks: 10 ms)
        self.ep_group = [ep_of[r] for r in range(lay.world_size)]
        self.pending = [[] for _ in range(lay.world_size)]
        self.slowdown = self.spec.slowdown()
        self.time_s_row = [self.time_s[r] for r in range(lay.world_size)]
        self.ledger = list(self.time_s_row)
        self.gpu = RankRows(lay.world_size, lambda _: simpy.Resource(self.net.env, capacity=1))
        sms = self.plan.gpu.sm_count  # the overlapped all-to-all holds some of them
        self.overlap_compute_factor = sms / (sms - OVERLAP_DISPATCHER_SMS)
        self.place = self.spec.placement()
        commits = get_schedule(self.spec.schedule).commits
        self.commits = None if commits is None else commits(lay.pp, self.spec.microbatches,
                                                            lay.vpp)

    @property
    def env(self) -> simpy.Environment:
        return self.net.env

    def held_params(self, rank: int) -> tuple[int, int]:
        """(dense, expert) parameters ``rank`` holds: its stage's, or with a mirrored placement
        (DualPipe) both of its stages' (two copies of the model per pipeline)."""
        stage = self.coords[rank]["pp"]
        held = self.place.vstages_of(stage) if self.place.copies > 1 else (stage,)
        return (sum(self.plan.dense_params[v] for v in held),
                sum(self.plan.expert_params[v] for v in held))

    def mailbox(self, kind: str, mb: int, vstage: int, rank: int) -> simpy.Event:
        """Event fired when pass ``kind`` of ``mb`` on ``vstage`` has its input at ``rank``."""
        key = (kind, mb, vstage, rank)
        if key not in self.mail:
            self.mail[key] = self.env.event()
        return self.mail[key]

    def all_to_all(self, rank: int, layer: LayerPlan, mb: int, phase: str) -> AllToAll:
        ep_ranks = self.ep_group[rank]
        key = (ep_ranks[0], layer.index, mb, phase)
        if key not in self.a2a:
            tag = len(self.a2a)
            gpus = np.asarray(ep_ranks, dtype=np.int64)
            self.a2a[key] = AllToAll(self.net, gpus, layer.a2a_bytes[phase], tag)
            self.a2a[key].route_all()  # one route search per group, not per sender
        return self.a2a[key]

    def a2a_arrival_s(self, rank: int, layer: LayerPlan, mb: int, phase: str,
                      send_s: float) -> float:
        """When ``rank``'s all-to-all ``phase`` of (``layer``, ``mb``), sent at ``send_s``, has
        all its bytes in, for states with ``analytic_a2a`` (and only when ``rank`` is the one
        simulated member of its EP group); full mode times all-to-alls with flows instead."""
        raise NotImplementedError("all-to-alls are flows here: use all_to_all()")

    def fused_layer(self, rank: int, layer: LayerPlan, mb: int, backward: bool
                    ) -> simpy.Event | None:
        """An event for ``rank``'s whole pass through ``layer`` when the state times it in
        closed form (fast mode: :mod:`moesim.step.fused_layer`), else None (op by op)."""
        return None

    def tp_ring(self, members: tuple[int, ...], size_bytes: float, kind: str
                ) -> RingCollective | FusedRing:
        """A TP / ETP ring all-gather (``kind`` "ag") or reduce-scatter ("rs") over
        ``members`` (:func:`moesim.step.tpcp.tp_collective`): flows on the network here."""
        make = ring_all_gather if kind == "ag" else ring_reduce_scatter
        return make(self.net, members, size_bytes, tag=TP_TAG, start=False)

    def top_link(self, rank: int) -> str:
        """The link ``rank`` waited on most, where the state can name it without the
        critical-path walk (fast mode's phases); "" here."""
        return ""

    def join_ring(self, rank: int, kind: str, item: int, size_bytes: float) -> simpy.Event:
        """``rank`` joins ring collective ``kind`` (dp_rs, edp_rs, dp_ag, edp_ag) of ``item``
        over its DP or EDP group; the event fires when ``rank`` is done."""
        members = ring_group(self.spec.layout, kind.split("_")[0], rank)
        key = (kind, members[0], item)
        if key not in self.rings:
            make = ring_reduce_scatter if kind.endswith("rs") else ring_all_gather
            self.rings[key] = make(self.net, members, size_bytes, start=False)
        ring, local = self.rings[key], members.index(rank)
        ring.start_rank(local)
        return ring.rank_done[local]

    def begin_tail(self, rank: int, opt_s: float, gathers: list[tuple[str, float]]) -> None:
        """``rank`` starts its DP tail (every reduce-scatter joined): it will wait for them,
        step its optimizer for ``opt_s`` and join the all-gathers ``gathers`` ((kind, bytes)).
        A state whose ``rank`` stands for other ranks starts their tails here (fast mode's
        phases); nothing here."""

    def reduce_grads(self, rank: int, item: int, dense: int, expert: int) -> None:
        """Start the gradient reduce-scatters of ``item`` (a layer, or -1 - vstage)."""
        for kind, params in (("dp_rs", dense), ("edp_rs", expert)):
            if params:
                size_bytes = params * GRAD_REDUCE_BYTES[self.spec.grad_reduce_dtype]
                self.pending[rank].append(self.join_ring(rank, kind, item, size_bytes))

    # ------------------------------------------------ recording (moesim.step.critical)
    def enter_pass(self, kind: str, mb: int, vstage: int) -> None:
        """The running process starts pass ``kind`` of ``mb`` on ``vstage``."""
        self.cursor[self.env.active_process] = (kind, mb, vstage, -1, "")

    def sent_a2a(self, a2a: AllToAll, local: int, layer: int, phase: str) -> None:
        """Member ``local`` of ``a2a`` (``phase`` of ``layer``) sends now."""
        sent = self.a2a_send_s.get(a2a.tag)
        if sent is None:
            sent = self.a2a_send_s[a2a.tag] = np.full(a2a.gpus.size, np.nan)
        sent[local] = self.env.now
        lane = self.env.active_process
        kind, mb, vstage, _, _ = self.cursor.get(lane, ("", -1, -1, -1, ""))
        self.cursor[lane] = (kind, mb, vstage, layer, phase)

    def record(self, rank: int, t0: float, category: str, op: object = None,
               value: object = None) -> None:
        """A span of ``rank`` from ``t0`` to now (compute, or a wait on ``op``)."""
        lane = self.env.active_process
        self.spans.append((rank, t0, self.env.now, category, lane, self.cursor.get(lane), op,
                           value))
