"""The critical path of a whole step: it tiles the step, crosses stages, names stragglers."""

from __future__ import annotations

import dataclasses
import json
from itertools import pairwise

import numpy as np
import pytest
from test_step import _spec  # the same small Mixtral-shaped steps

from moesim.parallel.layout import ParallelLayout
from moesim.router import RouterConfig
from moesim.scenario.schema import FabricSpec
from moesim.step import StepSpec, simulate_step
from moesim.step.critical import PATH_CATEGORIES, CriticalPath, critical_path
from moesim.step.plan import route_layer
from moesim.step.state import CATEGORIES, StepState

RAIL2 = FabricSpec(preset="rail-h800-64", params=(("hosts", 2), ("gpu", "H100")),
                   multipath="dmodk", batch_window_rel=0.02)
BALANCED = RouterConfig(kind="exact_balanced")


def _walk(spec: StepSpec) -> tuple[StepState, CriticalPath]:
    st = simulate_step(spec)
    return st, critical_path(st)


def _check_tiles_the_step(st: StepState, cp: CriticalPath) -> None:
    """Segments tile [0, step end] and each is something its rank really did then."""
    step = float(st.end_s.max())
    assert cp.step_time_s == step
    segs = cp.segments
    assert segs[0].start_s == 0.0 and segs[-1].end_s == step
    assert all(a.end_s == b.start_s for a, b in pairwise(segs))
    assert all(s.end_s > s.start_s for s in segs)
    assert sum(s.end_s - s.start_s for s in segs) == pytest.approx(step, rel=1e-12)
    assert sum(cp.by_category_s.values()) == pytest.approx(step, rel=1e-12)
    assert sum(cp.by_stage_s) == pytest.approx(step, rel=1e-12)
    assert set(cp.by_category_s) == set(PATH_CATEGORIES)
    spans = [(r, t0, t1, cat) for r, t0, t1, cat, *_ in st.spans]
    for seg in segs:
        if seg.category == "compute":  # exactly one of the rank's compute spans
            assert (seg.rank, seg.start_s, seg.end_s, "compute") in spans
        elif seg.category not in ("optimizer", "other"):  # inside one of the rank's waits
            assert any(r == seg.rank and t0 <= seg.start_s and seg.end_s <= t1 and c != "compute"
                       for r, t0, t1, c in spans)


@pytest.mark.parametrize(
    "layout, schedule, m, fabric",
    [
        (ParallelLayout(ep=8, dp=8), "1f1b", 1, None),
        (ParallelLayout(ep=4, dp=4, pp=2), "1f1b", 3, None),
        (ParallelLayout(ep=4, dp=4, pp=2, vpp=2), "interleaved", 4, None),
        (ParallelLayout(ep=4, dp=4, pp=2), "dualpipe", 4,  # FB ops overlap two passes
         dataclasses.replace(RAIL2, params=(("hosts", 2), ("gpus_per_host", 4),
                                            ("gpu", "H100")))),
    ],
)
def test_path_tiles_the_step(
    layout: ParallelLayout, schedule: str, m: int, fabric: FabricSpec | None
) -> None:
    kw: dict[str, object] = {"fabric": fabric} if fabric else {}
    st, cp = _walk(_spec(layout, schedule=schedule, microbatches=m, **kw))
    _check_tiles_the_step(st, cp)
    assert cp.end_rank == int(st.end_s.argmax())
    d = json.loads(json.dumps(cp.to_dict()))
    assert d["n_segments"] == len(cp.segments)
    assert sum(d["by_category_s"].values()) == pytest.approx(cp.step_time_s, rel=1e-12)


def test_one_f_one_b_path_crosses_every_stage() -> None:
    """pp=4 on one NVLink host (transfers nearly free): the step ends at stage 0 draining the
    backwards, and the path walks the warm-up forward of micro-batch 0 back from the last
    stage to stage 0, which starts at t = 0."""
    st, cp = _walk(_spec(ParallelLayout(ep=2, dp=2, pp=4), microbatches=4))
    _check_tiles_the_step(st, cp)
    assert cp.stages == (0, 1, 2, 3)
    assert cp.end_rank < 2  # stage 0
    per = 2
    first = [seg.rank // per for seg in cp.segments]
    warmup = first[: first.index(3) + 1]
    assert warmup == sorted(warmup) and set(warmup) == {0, 1, 2, 3}
    assert cp.segments[0].what.startswith("F mb0 vs0")
    transfer = sum(cp.by_category_s[c] for c in ("a2a", "p2p", "dp"))
    assert transfer < 0.1 * cp.step_time_s


def test_slow_gpu_is_the_straggler_with_its_excess() -> None:
    """Balanced routing, rank 5 (stage 1) 1.5x slower: it is the straggler, and its compute
    on the path exceeds its EP peers' for the same ops by exactly 1 - 1/1.5 of it."""
    lay = ParallelLayout(ep=4, dp=4, pp=2)
    st, cp = _walk(_spec(lay, microbatches=2, router=BALANCED, slow_gpus=((5, 1.5),)))
    _check_tiles_the_step(st, cp)
    s = cp.straggler
    assert s is not None and s.rank == 5 and s.cause == "slow_gpu"
    on_path = sum(seg.end_s - seg.start_s for seg in cp.segments
                  if seg.rank == 5 and seg.category == "compute")
    assert s.excess_s == pytest.approx(on_path * (1 - 1 / 1.5), rel=1e-6)
    assert "rank 5" in s.detail and "1.50x slower" in s.detail
    _, healthy = _walk(_spec(lay, microbatches=2, router=BALANCED))
    assert healthy.straggler is None or healthy.straggler.cause != "slow_gpu"
    assert cp.by_stage_s[1] > healthy.by_stage_s[1] * 1.2


def test_hot_expert_names_its_rank() -> None:
    """One expert per layer 8x as popular: the straggler is the EP rank hosting it, late to
    the all-to-all after its experts' GEMMs; uniform routing names no expert imbalance."""
    lay = ParallelLayout(ep=8, dp=8)
    spec = _spec(lay, router=RouterConfig(kind="hot", hot_experts=1, hot_factor=8.0))
    st, cp = _walk(spec)
    _check_tiles_the_step(st, cp)
    s = cp.straggler
    assert s is not None and s.cause == "expert_imbalance"
    routing = route_layer(spec, s.layer)
    ep = st.coords[s.rank]["ep"]
    assert int(np.argmax(routing.rank_load())) == ep
    assert int(np.argmax(routing.expert_load())) == s.experts[0]
    assert set(s.experts) <= set(routing.experts_on(ep).tolist())
    assert s.excess_s > 0 and f"hot experts {list(s.experts)}" in s.detail
    _, uniform = _walk(_spec(lay))
    assert all(c.cause != "expert_imbalance" for c in uniform.contributors)


def test_degraded_link_is_named_on_the_path() -> None:
    """A quarter-speed GPU-NIC link on host 1 (as in test_step.py): the EDP ring across it
    dominates the path, and the path names that link (either direction) and its tier."""
    lay = ParallelLayout(ep=8, dp=16)
    fault = (("factor", 0.25), ("kind", "degrade"), ("link", ("h1/gpu0", "h1/nic0")))
    st, cp = _walk(_spec(lay, fabric=dataclasses.replace(RAIL2, faults=(fault,))))
    _check_tiles_the_step(st, cp)
    names = {"h1/gpu0->h1/nic0", "h1/nic0->h1/gpu0"}
    top = next(c for c in cp.contributors if c.kind == "link")
    assert top.link in names and "(tier pcie)" in top.detail
    assert top.time_s > 0.5 * cp.step_time_s
    _, healthy = _walk(_spec(lay, fabric=RAIL2))
    assert all(c.link not in names for c in healthy.contributors if c.kind == "link")


def test_late_ring_member_is_followed() -> None:
    """EP groups {0-3} and {4-7} over one 8-rank DP ring; rank 5 2x slower (compute and
    optimizer) joins the parameter all-gathers (dense over DP, expert over EDP) last, so the
    walk leaves the step's last rank in the ring that ended the step for rank 5 at its join,
    not for another member."""
    spec = _spec(ParallelLayout(ep=4, dp=8), router=BALANCED, slow_gpus=((5, 2.0),))
    st, cp = _walk(spec)
    _check_tiles_the_step(st, cp)
    last = cp.segments[-1]
    assert last.category == "dp" and last.what.startswith(("ring dp_ag", "ring edp_ag"))
    assert last.rank == cp.end_rank != 5
    assert cp.segments[-2].rank == 5 and cp.segments[-2].category == "optimizer"
    rs_end = min(t1 for r, t0, t1, cat, *_ in st.spans if r == 5 and cat == "dp_exposed")
    optimizer_s = st.time_s[5, CATEGORIES.index("optimizer")]
    assert last.start_s == pytest.approx(rs_end + optimizer_s, rel=1e-12)  # rank 5 joins
    s = cp.straggler
    assert s is not None and s.rank == 5 and s.cause == "slow_gpu"
