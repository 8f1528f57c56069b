"""Fast mode's TP / CP layers in closed form (moesim.step.fused_layer) against the same step
with every TP chunk and CP K/V send a flow (Fast(fuse_tp=False))."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from moesim.collectives.fused_ring import ring_ends_s, ring_schedule_s
from moesim.fabric.spec import FabricSpec
from moesim.model import get_model
from moesim.parallel.layout import ParallelLayout
from moesim.step import Fast, StepSpec, run_step
from moesim.step.fast import simulate_fast

FABRIC = FabricSpec(preset="rail-h800-64", params=(("hosts", 4), ("gpus_per_host", 8),
                                                  ("gpu", "H100")), multipath="dmodk")


def _spec(tp: int, cp: int, **kw: object) -> StepSpec:
    model = dataclasses.replace(get_model("mixtral-8x7b"), num_layers=4,
                                moe_layers=(False, True, True, True))
    dp = 32 // (2 * tp * cp)
    base = dict(model=model, layout=ParallelLayout(tp=tp, cp=cp, ep=8, dp=dp, pp=2),
                seq_len=1024, fabric=FABRIC, microbatches=3)
    base.update(kw)
    return StepSpec(**base)  # type: ignore[arg-type]


SIX = FabricSpec(preset="rail-h800-64", params=(("hosts", 6), ("gpus_per_host", 8),
                                                ("gpu", "H100")), multipath="dmodk")
CASES = {
    "tp2 cp2, stages of 1.5 hosts": _spec(2, 2, fabric=SIX, layout=ParallelLayout(
        tp=2, cp=2, ep=4, dp=3, pp=4)),
    "tp2": _spec(2, 1),
    "tp4": _spec(4, 1),
    "cp2": _spec(1, 2),
    "tp2 cp2": _spec(2, 2),
    "tp2 cp2 full recompute": _spec(2, 2, recompute="full"),
    "tp2 slow gpu": _spec(2, 1, slow_gpus=((1, 1.5),)),
    "cp2 slow gpu": _spec(1, 2, slow_gpus=((2, 1.3),)),
    "tp2 interleaved": _spec(2, 1, layout=ParallelLayout(tp=2, ep=8, dp=8, pp=2, vpp=2),
                             schedule="interleaved", microbatches=4),
}


LATE = {"tp2 slow gpu"}  # members reach some rings apart (full recompute's per-expert-rank
# forward did too with the per-token draw of the uniform router; not with its direct counts)


@pytest.mark.parametrize("name", list(CASES))
def test_fused_layers_are_the_step_with_flows(name: str) -> None:
    """Step time and every category of the breakdown equal the flow path's (1e-9) when no
    transfer met another on a link; where some did (members far apart: a slow GPU, full
    recompute's per-expert-rank forward) within the summed late starts (the stated bound).
    Either way with a fraction of the flows (only the pipeline sends remain)."""
    spec = CASES[name]
    st, _ = simulate_fast(spec, 1)
    clock = st.link_clock
    assert st.fuse_layers and clock is not None and (clock.late_n > 0) == (name in LATE)
    fused, flows = run_step(spec, Fast()), run_step(spec, Fast(fuse_tp=False))
    bound = clock.late_s + 1e-9 * flows.step_time_s
    assert abs(fused.step_time_s - flows.step_time_s) <= bound
    for k, v in flows.breakdown_s.items():
        assert abs(fused.breakdown_s[k] - v) <= bound, k
    assert fused.engine["flows"] < flows.engine["flows"] / 3


def test_fused_layers_are_used_and_cover_tp_and_cp() -> None:
    """The closed form runs (no flow for a TP chunk or CP send) where nothing else crosses
    NVLink; with PXN (cross-rail sends relayed over NVLink) it does not."""
    st, _ = simulate_fast(CASES["tp2 cp2"], 1)
    assert st.fuse_layers and st.stages and not st.tp_rings and not st.cp_mail
    pxn = dataclasses.replace(FABRIC, pxn=True)
    st, _ = simulate_fast(dataclasses.replace(CASES["tp2 cp2"], fabric=pxn), 1)
    assert not st.fuse_layers and st.cp_mail


def test_stages_sharing_a_host_fuse_when_their_sends_cross_other_links() -> None:
    """Stages of 1.5 hosts: the representative's stages start on different hosts, so its
    pipeline sends leave through the NICs and the layers fuse (exact above); stages of 2
    GPUs (8 on a host): its sends cross NVLink links its TP rings use, so they stay flows."""
    st, _ = simulate_fast(CASES["tp2 cp2, stages of 1.5 hosts"], 1)
    assert st.fuse_layers
    tiny = _spec(2, 1, layout=ParallelLayout(tp=2, ep=2, dp=1, pp=16), microbatches=2,
                 model=dataclasses.replace(get_model("mixtral-8x7b"), num_layers=16,
                                           moe_layers=(True,) * 16))
    st, _ = simulate_fast(tiny, 1)
    assert not st.fuse_layers and not st.fuse_tp and st.tp_rings


def test_ring_schedule_of_several_rings_is_each_ring_alone() -> None:
    """Two disjoint rings of 3 at once (``pred``) give each ring's own ends; the last drain
    of an edge is its last send plus one chunk."""
    rng = np.random.default_rng(3)
    start, chunk, lat = rng.uniform(0, 1e-3, 6), rng.uniform(1e-5, 1e-4, 6), np.full(6, 1e-6)
    pred = np.array([2, 0, 1, 5, 3, 4])
    ends, drain = ring_schedule_s(start, chunk, lat, pred, 3)
    for s in (slice(0, 3), slice(3, 6)):
        np.testing.assert_array_equal(ends[s], ring_ends_s(start[s], chunk[s], lat[s]))
    assert (drain >= start + chunk).all() and (drain <= ends.max()).all()
