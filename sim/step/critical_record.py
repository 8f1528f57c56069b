"""Fill a finished step's walk record (:class:`WalkRecord`) from its state.

The one place that reads the step's live objects for the critical path: the recorded spans
(:meth:`moesim.step.state.StepState.record`), what released each wait
(:mod:`moesim.step.critical_release`: the flow table, completion groups and rings), the
routings of the MoE layers and the fabric's link names. The walk
(:mod:`moesim.results.critical_path`) then reads only the record.
"""

from __future__ import annotations

from collections.abc import Hashable

import numpy as np

from moesim.results.walk_record import SPAN_COLUMNS, WalkRecord
from moesim.step.critical_release import Release, Releases
from moesim.step.state import StepState

COMPUTE = Release()  # a compute span waits on nothing


class _Table:
    """Numbers the values it is given in order of first sight (a value -> its row)."""

    def __init__(self) -> None:
        self.row: dict[Hashable, int] = {}

    def __call__(self, value: Hashable) -> int:
        return self.row.setdefault(value, len(self.row))

    def values(self) -> tuple:
        return tuple(self.row)


def walk_record(st: StepState) -> WalkRecord:
    """The record of the finished ``st`` that the critical-path walk reads (module docstring
    of :mod:`moesim.results.walk_record`)."""
    lay = st.spec.layout
    strings, links, a2a = _Table(), _Table(), _Table()
    rows = _span_rows(st, strings, links, a2a)
    cols = {name: np.array([r[i] for r in rows], dtype=dtype)
            for i, (name, dtype) in enumerate(SPAN_COLUMNS.items())}
    groups = sorted(set(st.ep_group))
    row_of = {g: i for i, g in enumerate(groups)}
    moe, load, hot = _layers(st)
    fab = st.net.fabric
    used = links.values()
    return WalkRecord(
        world_size=lay.world_size, pp=lay.pp,
        end_s=np.asarray(st.end_s, dtype=np.float64).copy(),
        last_op_s=np.asarray(st.last_op_s, dtype=np.float64).copy(),
        slowdown=np.asarray(st.slowdown, dtype=np.float64).copy(),
        ep_coord=np.array([c["ep"] for c in st.coords], dtype=np.int64),
        ep_group=np.array([row_of[g] for g in st.ep_group], dtype=np.int64),
        ep_groups=np.array(groups, dtype=np.int64),
        **cols, strings=strings.values(),
        a2a_send_s=np.array([st.a2a_send_s[tag] for tag in a2a.values()],
                            dtype=np.float64).reshape(-1, lay.ep),
        moe_layers=moe, rank_load=load, hot_experts=hot,
        link_names=tuple(fab.link_name(k) for k in used),
        link_tiers=tuple(str(fab.tier[k]) for k in used),
    )


def _span_rows(st: StepState, strings: _Table, links: _Table, a2a: _Table
               ) -> list[tuple[object, ...]]:
    """One row per recorded span, in :data:`SPAN_COLUMNS` order."""
    releases = Releases(st)
    lanes = _Table()
    rows: list[tuple[object, ...]] = []
    for sp in st.spans:
        rank, t0, t1, category, lane, where, _op, _value = sp
        lane_id = -1 if lane is None else lanes(id(lane))
        kind, mb, vs, layer, phase = where if where is not None else (None, -1, -1, -1, "")
        rel = COMPUTE if category == "compute" else releases.of(sp)
        link = -1 if rel.link < 0 else links(rel.link)
        rows.append((rank, t0, t1, strings(category), lane_id,
                     -1 if kind is None else strings(kind), mb, vs, layer, strings(phase),
                     rel.rank, rel.send_s, link, rel.excess_s, strings(rel.what),
                     -1 if rel.a2a < 0 else a2a(rel.a2a), rel.local))
    return rows


def _layers(st: StepState) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per MoE layer: its index, each EP coordinate's token load, its hottest experts (of
    the ranks the walk can name: :class:`moesim.step.plan.LayerRouting`), as the plan routed
    it."""
    moe = [(layer.index, layer.routing) for layer in st.plan.layers
           if layer.routing is not None]
    ep = st.spec.layout.ep
    load = np.array([routing.load for _, routing in moe], dtype=np.int64).reshape(-1, ep)
    hot = np.array([routing.hot_experts for _, routing in moe],
                   dtype=np.int64).reshape(-1, ep, 3)
    return np.array([index for index, _ in moe], dtype=np.int64), load, hot
