"""What every simulated rank of a step did, in time order: the record the exporters read.

:func:`run_recorded` runs a step as :func:`moesim.step.run.run_step` does and keeps, besides
the :class:`StepResult`, a :class:`StepRecord`: per rank its compute spans and its blocked
spans in each kind of communication, each communication with its group, type and bytes.

Where the numbers come from (the state the rank programs leave, :mod:`moesim.step.program`):

* compute and wait spans are the ones the critical-path walk reads (``StepState.spans``);
  fast mode records them when its MoE layers are not fused into one timeout, so a recorded
  fast step runs with ``Fast(fuse_moe=False)`` (same times, one event per op);
* an all-to-all wait names its :class:`AllToAll` (members, the [sender, receiver] byte matrix);
* a TP / ETP wait is a ring of ``StepState.tp_rings`` (members, size = chunk x members);
* a pipeline wait fires with its sender; its size is ``plan.act_bytes``; a CP wait is the
  K/V chunk from the CP ring predecessor (``plan.cp_kv_bytes``, twice in the backward);
* the DP tail's first wait is the gradient reduce-scatters, its second the parameter
  all-gathers; their sizes are the stage's dense / expert parameters per GPU times the
  gradient or parameter bytes, over the DP x CP and EDP rings (with ``dp_overlap`` the
  reduce-scatters run per layer during the backward; they are listed where the rank waits
  for them); the optimizer runs between the two (``time_s[rank, "optimizer"]``).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
from typing import Any, cast

import numpy as np

from moesim.step.groups import group, ring_group
from moesim.step.mode import Fast, StepMode, step_mode
from moesim.step.result import StepResult, summarise
from moesim.step.spec import GRAD_REDUCE_BYTES, StepSpec
from moesim.step.state import CATEGORIES, PARAM_BYTES, StepState, Where

TOP_LINKS = 48
TRACKS = ("compute", "a2a", "tp", "cp", "pp", "dp", "optimizer")
TRACK_OF = {"compute": "compute", "a2a_exposed": "a2a", "tp_exposed": "tp",
            "cp_exposed": "cp", "bubble": "pp", "dp_exposed": "dp"}


@dataclass(frozen=True)
class Comm:
    """One communication as one rank sees it."""

    kind: str  # all_to_all | all_gather | reduce_scatter | recv
    group_kind: str  # ep | tp | etp | cp | pp | dp | edp
    group: tuple[int, ...]  # member ranks (pp recv: (sender, receiver); cp: the CP ring)
    size_bytes: float  # what this rank puts on the wire (a2a: its row; ring: the buffer)
    send_bytes: tuple[float, ...] = ()  # all-to-all: bytes to each member
    recv_bytes: tuple[float, ...] = ()  # all-to-all: bytes from each member
    peer: int = -1  # recv: the sender


@dataclass(frozen=True)
class Span:
    """``rank`` computing, or blocked in ``comm``, from ``start_s`` to ``end_s``."""

    rank: int
    start_s: float
    end_s: float
    track: str  # one of TRACKS
    name: str
    comm: Comm | None = None
    where: tuple[str, int, int] = ("", -1, -1)  # (pass kind, micro-batch, virtual stage)


@dataclass(frozen=True)
class LinkSeries:
    """Mean utilisation of the busiest links per time bin (:mod:`moesim.step.linkbins`)."""

    starts_s: tuple[float, ...]  # bin starts; every bin is width_s wide
    width_s: float
    names: tuple[str, ...]  # "u->v [tier]" per link kept
    util: tuple[tuple[float, ...], ...]  # [link kept][bin]
    links_total: int  # links that carried bytes (the busiest TOP_LINKS are kept)


@dataclass(frozen=True)
class StepRecord:
    """The spans of every simulated rank (time order within a rank)."""

    scenario: str
    mode: str
    world_size: int
    ranks: tuple[int, ...]
    spans: tuple[Span, ...]
    links: LinkSeries | None = None  # when the run binned its link loads
    critical: tuple[dict[str, Any], ...] = ()  # the critical path's segments (full mode)
    meta: dict[str, Any] = field(default_factory=dict)

    def of_rank(self, rank: int) -> list[Span]:
        return [s for s in self.spans if s.rank == rank]


def recording_mode(mode: str | StepMode) -> StepMode:
    """``mode``, with fast mode's MoE layers unfused so that every op leaves a span."""
    strategy = step_mode(mode)
    if isinstance(strategy, Fast):
        return Fast(routing_draws=strategy.routing_draws, fuse_moe=False)
    return strategy


def run_recorded(spec: StepSpec, mode: str | StepMode, scenario: str = ""
                 ) -> tuple[StepResult, StepRecord]:
    """Simulate ``spec`` like ``run_step`` and keep the record of every rank's spans."""
    strategy = recording_mode(mode)
    st, ranks = strategy.simulate(spec)
    result = summarise(spec, st, ranks, strategy.name, strategy.critical(st))
    record = step_record(st, ranks, strategy.name, scenario)
    if result.critical is not None:
        record = replace(record, critical=tuple(asdict(s) for s in result.critical.segments))
    return result, record


def step_record(st: StepState, ranks: list[int], mode: str, scenario: str = "") -> StepRecord:
    """The :class:`StepRecord` of the finished ``st`` (module docstring)."""
    rings = {id(ev): (cast(str, key[0]), cast(str, key[1]), ring)  # (over, kind, ...): tpcp
             for key, ring in st.tp_rings.items()
             for ev in ring.rank_done}
    dp_seen: dict[int, int] = {}
    spans: list[Span] = []
    for rank, t0, t1, category, _lane, where, op, value in sorted(
            st.spans, key=lambda s: (s[0], s[1], s[2])):
        track = TRACK_OF[category]
        comm: Comm | None = None
        if track == "a2a":
            comm = _a2a(op, rank)
        elif track == "tp":
            comm = _ring(rings.get(id(op)), rank)
        elif track == "pp":
            comm = Comm("recv", "pp", (int(value[0]), rank), st.plan.act_bytes,  # type: ignore[index]
                        peer=int(value[0]))  # type: ignore[index]
        elif track == "cp":
            comm = _cp(st, rank, where)
        elif track == "dp":
            n = dp_seen[rank] = dp_seen.get(rank, 0) + 1
            spans += _dp(st, rank, t0, t1, gather=n > 1)
            if n == 1:
                opt_s = float(st.time_s[rank, CATEGORIES.index("optimizer")])
                spans.append(Span(rank, t1, t1 + opt_s, "optimizer", "optimizer"))
            continue
        at = (str(where[0]), int(where[1]), int(where[2])) if where else ("", -1, -1)
        spans.append(Span(rank, t0, t1, track, _name(track, where, comm), comm, at))
    return StepRecord(scenario, mode, st.spec.layout.world_size, tuple(ranks), tuple(spans),
                      links=link_series(st, float(st.end_s[ranks].max())))


def link_series(st: StepState, end_s: float, top: int = TOP_LINKS) -> LinkSeries | None:
    """The ``top`` busiest links' binned utilisation, if the run kept bins."""
    bins = getattr(st.net.stats, "bins", None)
    if bins is None:
        return None
    starts, util = bins.utilisation(end_s)
    moved = st.net.stats.bytes
    used = np.flatnonzero(moved > 0)
    keep = used[np.argsort(-moved[used], kind="stable")][:top]
    fab = st.net.fabric
    return LinkSeries(tuple(float(t) for t in starts), float(bins.width_s),
                      tuple(f"{fab.link_name(int(k))} [{fab.tier[k]}]" for k in keep),
                      tuple(tuple(round(float(u), 6) for u in util[:, k]) for k in keep),
                      int(used.size))


def _name(track: str, where: Where | None, comm: Comm | None) -> str:
    kind, mb, vstage, layer, phase = where if where else ("", -1, -1, -1, "")
    at = f"{kind} mb{mb} vs{vstage}" if kind else "step"
    if track == "compute":
        return f"compute {at}" + (f" after L{layer} {phase}" if layer >= 0 else "")
    if track == "a2a":
        return f"{phase} a2a L{layer} {at}"
    what = f"{comm.group_kind} {comm.kind}" if comm else track
    return f"{what} {at}"


def _a2a(op: Any, rank: int) -> Comm:
    members = tuple(int(g) for g in op.gpus)
    local = members.index(rank)
    sent = tuple(float(b) for b in op.size_bytes[local])
    got = tuple(float(b) for b in op.size_bytes[:, local])
    return Comm("all_to_all", "ep", members, sum(sent) - sent[local], sent, got)


def _ring(found: tuple[str, str, Any] | None, rank: int) -> Comm | None:
    if found is None:
        return None
    over, kind, ring = found
    members = tuple(int(g) for g in ring.gpus)
    size = float(ring.chunk_bytes) * len(members)
    return Comm("all_gather" if kind == "ag" else "reduce_scatter", over, members, size)


def _cp(st: StepState, rank: int, where: object) -> Comm:
    members = group(st.spec.layout, "cp", rank)
    pred = members[(members.index(rank) - 1) % len(members)]
    backward = bool(where) and where[0] == "B"  # type: ignore[index]
    size = st.plan.cp_kv_bytes * (2 if backward else 1)
    return Comm("recv", "cp", tuple(members), size, peer=pred)


def _dp(st: StepState, rank: int, t0: float, t1: float, gather: bool) -> list[Span]:
    """The DP tail's reduce-scatters (first wait) or all-gathers (second), one span each."""
    lay = st.spec.layout
    per_param = PARAM_BYTES if gather else GRAD_REDUCE_BYTES[st.spec.grad_reduce_dtype]
    kind = "all_gather" if gather else "reduce_scatter"
    out = []
    for ring, params in zip(("dp", "edp"), st.held_params(rank), strict=True):
        members = ring_group(lay, ring, rank)
        if params and len(members) > 1:
            comm = Comm(kind, ring, members, float(params) * per_param)
            out.append(Span(rank, t0, t1, "dp", f"{ring} {kind} (grads)" if not gather
                            else f"{ring} {kind} (params)", comm))
    return out
