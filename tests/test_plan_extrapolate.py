"""A design's step from two short runs (moesim.plan.extrapolate) against the whole step."""

from __future__ import annotations

import dataclasses

import pytest

from moesim.fabric.spec import FabricSpec
from moesim.model import get_model
from moesim.parallel.layout import ParallelLayout
from moesim.plan.extrapolate import BOUND_REL, at_microbatches, extend, probe_counts
from moesim.plan.simulate import SimTask, simulate_task
from moesim.step import StepSpec

FABRIC = FabricSpec(preset="rail-h800-64", params=(("hosts", 8), ("gpus_per_host", 8),
                                                  ("gpu", "H100")), multipath="dmodk")
MODEL = dataclasses.replace(get_model("mixtral-8x7b"), num_layers=8, moe_layers=(True,) * 8)


def _spec(layout: ParallelLayout, m: int, **kw: object) -> StepSpec:
    return StepSpec(model=MODEL, layout=layout, seq_len=1024, fabric=FABRIC, microbatches=m,
                    **kw)  # type: ignore[arg-type]


UNEVEN = dataclasses.replace(MODEL, num_layers=9, moe_layers=(False,) + (True,) * 8)
CASES = {
    "uneven stages pp4": StepSpec(model=UNEVEN, layout=ParallelLayout(pp=4, ep=8, dp=16),
                                  seq_len=1024, fabric=FABRIC, microbatches=40),
    "tp1 pp4 ep8": _spec(ParallelLayout(pp=4, ep=8, dp=16), 40),
    "tp2 pp4 ep8": _spec(ParallelLayout(tp=2, pp=4, ep=8, dp=8), 40, recompute="full"),
    "cp2 pp2 ep8": _spec(ParallelLayout(cp=2, pp=2, ep=8, dp=16), 30),
    "tp1 pp8 ep8": _spec(ParallelLayout(pp=8, ep=8, dp=8), 48),
    "tp2 pp2 vpp2": _spec(ParallelLayout(tp=2, pp=2, vpp=2, ep=8, dp=16), 40,
                          schedule="interleaved"),
}


@pytest.mark.parametrize("name", list(CASES))
def test_extended_step_is_the_whole_step(name: str) -> None:
    """Step and breakdown from two probes within the stated bound of the whole fast step."""
    spec = CASES[name]
    probes = probe_counts(spec)
    assert probes is not None and probes[1] < spec.microbatches / 2
    ext = simulate_task(SimTask(0, spec, 1, True))["result"]
    whole = simulate_task(SimTask(0, spec, 1, False))["result"]
    assert ext["extrapolated_from_microbatches"] == list(probes)
    assert "extrapolated_from_microbatches" not in whole
    assert ext["step_time_s"] == pytest.approx(whole["step_time_s"], rel=BOUND_REL)
    for k, v in whole["breakdown_s"].items():
        assert ext["breakdown_s"][k] == pytest.approx(v, rel=BOUND_REL,
                                                      abs=BOUND_REL * whole["step_time_s"]), k
    assert ext["mfu"] == pytest.approx(whole["mfu"], rel=BOUND_REL)


def test_affine_record_and_when_not_used() -> None:
    lo = {"step_time_s": 2.0, "breakdown_s": {"compute": 1.0, "bubble": 1.0},
          "stage_makespan_s": [1.0, 2.0], "tokens_per_s": 100.0, "mfu": 0.2,
          "tflops_per_gpu": 10.0, "critical_path": None}
    hi = {**lo, "step_time_s": 3.0, "breakdown_s": {"compute": 2.0, "bubble": 1.0},
          "stage_makespan_s": [2.0, 3.0], "tokens_per_s": 120.0, "mfu": 0.24}
    out = extend(lo, hi, 10, 20, 40)
    assert out["step_time_s"] == 5.0 and out["breakdown_s"] == {"compute": 4.0, "bubble": 1.0}
    assert out["stage_makespan_s"] == [4.0, 5.0]
    assert out["tokens_per_s"] == pytest.approx(120.0 * 2 * 3 / 5)  # 2x tokens in 5/3 the time
    short = CASES["tp1 pp4 ep8"]
    assert probe_counts(at_microbatches(short, 12)) is None  # as cheap to run whole
    rec = simulate_task(SimTask(0, short, 0, True))["result"]  # every layer drawn: whole
    assert "extrapolated_from_microbatches" not in rec
