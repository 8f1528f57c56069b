"""The host-launch band: expert GEMM launches counted by hand, the floor at both ends."""

from __future__ import annotations

import dataclasses
import doctest

import pytest

import moesim.step.host as host
from moesim.model import get_model
from moesim.parallel.layout import ParallelLayout
from moesim.step import StepSpec
from moesim.step.host import HOST_LAUNCH_S, expert_gemm_launches, host_band
from moesim.validate.bridge import BRIDGE_CASES
from moesim.validate.step import bridge_spec


def test_qwen3_30b_8xb200_launches_by_hand() -> None:
    """GBS 512 over DP8 at MBS 1: 64 micro-batches; 48 MoE layers; 128 experts / EP8 = 16 local;
    (2 forward + 4 backward) GEMMs per local expert (recompute of this row: not full)."""
    case = next(c for c in BRIDGE_CASES if c.name.startswith("qwen3-30b-a3b 8x B200"))
    spec = bridge_spec(case)
    assert spec.resolved_recompute() != "full"
    assert expert_gemm_launches(spec) == 64 * 48 * 16 * 6 == 294_912


def test_busiest_stage_and_full_recompute() -> None:
    model = dataclasses.replace(get_model("mixtral-8x7b"), num_layers=6,
                                moe_layers=(True, True, True, False, False, True))
    spec = StepSpec(model=model, layout=ParallelLayout(pp=2, ep=2, dp=4), gpu="H100",
                    microbatches=4, recompute="none")
    # stages: layers 0-2 (3 MoE) and 3-5 (1 MoE); 8 experts / EP2 = 4 local; 6 GEMMs each
    assert expert_gemm_launches(spec) == 3 * 4 * 4 * 6
    full = dataclasses.replace(spec, recompute="full")
    assert expert_gemm_launches(full) == 3 * 4 * 4 * 8  # the forward GEMMs run again


def test_band_is_the_floor_at_both_ends() -> None:
    spec = StepSpec(model=get_model("mixtral-8x7b"), layout=ParallelLayout(ep=8, dp=8),
                    gpu="H100", microbatches=4, recompute="none")
    n = 32 * 4 * 1 * 6
    short, long = host_band(spec, 1e-3), host_band(spec, 10.0)
    assert short.launches == long.launches == n
    assert short.step_s == {end: n * c for end, c in HOST_LAUNCH_S.items()}
    assert long.step_s == {"low": 10.0, "high": 10.0}  # GPU-bound: the band is the step
    assert HOST_LAUNCH_S["low"] == pytest.approx(4.58e-6)
    assert HOST_LAUNCH_S["high"] == pytest.approx(45.3e-6, rel=1e-3)


def test_dense_model_has_no_expert_launches() -> None:
    dense = dataclasses.replace(get_model("mixtral-8x7b"), n_routed_experts=0, top_k=0,
                                moe_intermediate_size=0, intermediate_size=14336,
                                moe_layers=(False,) * 32)
    spec = StepSpec(model=dense, layout=ParallelLayout(dp=8), gpu="H100", recompute="none")
    assert expert_gemm_launches(spec) == 0


def test_docstring_example() -> None:
    result = doctest.testmod(host)
    assert result.attempted > 0 and result.failed == 0


def test_band_ends_are_the_registered_measured_constants() -> None:
    from moesim.calibration import CONSTANTS

    rows = {end: CONSTANTS[f"HOST_LAUNCH_{end.upper()}_S"] for end in ("low", "high")}
    assert {end: row.value for end, row in rows.items()} == HOST_LAUNCH_S
    assert {row.kind for row in rows.values()} == {"measured"}
