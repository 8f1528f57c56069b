"""Precisions as users name them and the dropless sync, by hand."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from moesim.calibration import DROPLESS_SYNC_S, HBM_ACHIEVABLE_FRACTION
from moesim.calibration import KERNEL_LAUNCH_OVERHEAD_S as LAUNCH
from moesim.errors import ConfigError
from moesim.hardware import (
    PRECISIONS,
    GemmShape,
    cast_time_s,
    gemm_time_s,
    get_gpu,
    memory_bound_time_s,
)
from moesim.model import get_model
from moesim.parallel.layout import ParallelLayout
from moesim.scenario.schema import FabricSpec
from moesim.step import StepSpec
from moesim.step.plan import build_plan
from moesim.step.run import simulate_step
from moesim.step.state import CATEGORIES
from moesim.workload.costs import experts_s, router_s
from moesim.workload.elementwise import permute_bytes
from moesim.workload.shape import LayerShape

B200 = get_gpu("B200")
H100 = get_gpu("H100")


def _hbm_s(gpu: object, size_bytes: float) -> float:
    return size_bytes / (gpu.hbm_bw_bytes_per_s * HBM_ACHIEVABLE_FRACTION)  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("precision", "kernels_bytes"),
    [("bf16", ()), ("fp8", ()), ("fp8-cs", (2.0, 4.0)), ("fp8-block", (2 + 2 * (1 + 4 / 128),)),
     ("mxfp8", (2 + 2 * (1 + 1 / 32),))],
)
def test_cast_cost_per_precision_by_hand(precision: str, kernels_bytes: tuple[float, ...]
                                         ) -> None:
    """fp8-cs: amax pass (read 2 B) + cast-transpose (read 2, write 1 + 1); block / MX: one pass
    writing both copies with their scales; each kernel one launch; bf16 / fp8: nothing."""
    n = 3_000_000.0
    want = sum(_hbm_s(B200, n * b) + LAUNCH for b in kernels_bytes)
    assert cast_time_s(B200, n, precision) == pytest.approx(want, rel=1e-12)
    assert cast_time_s(B200, 0.0, precision) == 0.0


def test_precision_names_and_gemm_rates() -> None:
    assert set(PRECISIONS) == {"bf16", "fp8", "fp8-cs", "fp8-block", "mxfp8"}
    for name, p in PRECISIONS.items():
        assert p.gemm_dtype == ("bf16" if name == "bf16" else "fp8")
    shape = LayerShape(get_model("mixtral-8x7b"), 4096, 4096, "fp8-block")
    assert shape.gemm_dtype == "fp8"


def _qwen_like(precision: str) -> LayerShape:
    model = get_model("qwen3-235b-a22b")
    return LayerShape(model, 4096, 4096, precision)


@pytest.mark.parametrize("backward", [False, True])
def test_expert_casts_by_hand(backward: bool) -> None:
    """Grouped fc1 [rows, h] x [h, 2 ffn] and fc2 [rows, ffn] x [ffn, h]: forward quantises
    their inputs (rows x h, rows x ffn), backward their output gradients (rows x 2 ffn,
    rows x h); the GEMMs themselves run at the FP8 rate either way."""
    load = np.array([300.0, 260.0, 0.0, 512.0])
    rows, h, ffn = load.sum(), 4096, 1536
    got = (experts_s(_qwen_like("mxfp8"), B200, load, 1.0, backward)
           - experts_s(_qwen_like("fp8"), B200, load, 1.0, backward))
    elems = (rows * 2 * ffn, rows * h) if backward else (rows * h, rows * ffn)
    want = sum(_hbm_s(B200, e * (2 + 2 * (1 + 1 / 32))) + LAUNCH for e in elems)
    assert got == pytest.approx(want, rel=1e-9)


def test_mxfp8_needs_blackwell() -> None:
    model = dataclasses.replace(get_model("mixtral-8x7b"), num_layers=2, moe_layers=(True,) * 2)
    with pytest.raises(ConfigError) as err:
        StepSpec(model=model, layout=ParallelLayout(ep=8, dp=8), gpu="H100",
                 compute_dtype="mxfp8")
    assert err.value.field == "step.compute_dtype" and "Blackwell" in err.value.problem
    StepSpec(model=model, layout=ParallelLayout(ep=8, dp=8), gpu="H100", compute_dtype="fp8-cs")


@pytest.mark.parametrize("precision", ["fp8", "fp8-cs", "fp8-block", "mxfp8"])
def test_fp8_is_refused_on_ampere(precision: str) -> None:
    model = dataclasses.replace(get_model("mixtral-8x7b"), num_layers=2, moe_layers=(True,) * 2)
    with pytest.raises(ConfigError) as err:
        StepSpec(model=model, layout=ParallelLayout(ep=8, dp=8), gpu="A100",
                 compute_dtype=precision)
    assert err.value.field == "step.compute_dtype"
    assert err.value.problem == (f"{precision} needs FP8 tensor cores (Hopper or Blackwell); "
                                 "A100 has none: use bf16")
    StepSpec(model=model, layout=ParallelLayout(ep=8, dp=8), gpu="A800", compute_dtype="bf16")


def test_fp8_on_ampere_is_one_line_from_the_command(tmp_path: Path) -> None:
    scenario = tmp_path / "a100.yaml"
    scenario.write_text(
        "name: a100-fp8\nmodel: mixtral-8x7b\ngpu: A100\n"
        "fabric: {preset: rail-h100-64, params: {gpu: A100, nic_gbit: 200}}\n"
        "layout: {tp: 1, pp: 4, vpp: 8, ep: 8, dp: 16}\nschedule: interleaved\n"
        "global_batch: 256\nmicro_batch_size: 1\nseq_len: 4096\ncompute_dtype: fp8-cs\n"
    )
    res = subprocess.run([sys.executable, "-m", "moesim.cli", "step", str(scenario)],
                         capture_output=True, text=True, timeout=60, check=False)
    assert res.returncode == 2, res.stderr
    assert res.stderr.splitlines() == [
        "moesim: workload.compute_dtype: fp8-cs needs FP8 tensor cores (Hopper or Blackwell); "
        "A100 has none: use bf16"]


def test_router_includes_the_dropless_sync() -> None:
    shape = _qwen_like("bf16")
    gate = gemm_time_s(H100, GemmShape(4096, 128, 4096, "bf16"))
    permute = memory_bound_time_s(H100, permute_bytes(shape))
    assert router_s(shape, H100, 1.0) - gate - permute == pytest.approx(DROPLESS_SYNC_S)


def _small(precision: str) -> StepSpec:
    model = dataclasses.replace(get_model("mixtral-8x7b"), num_layers=2, moe_layers=(True,) * 2)
    return StepSpec(model=model, layout=ParallelLayout(ep=8, dp=8), gpu="H100", seq_len=1024,
                    microbatches=2, recompute="none", compute_dtype=precision,
                    fabric=FabricSpec(preset="hgx-h100", multipath="dmodk"))


def test_weights_are_quantised_once_per_step() -> None:
    """The optimizer column grows by one cast of the rank's dense + expert weights."""
    plan = build_plan(_small("fp8-block"))
    weights = plan.dense_params[0] + plan.expert_params[0]
    col = CATEGORIES.index("optimizer")
    got = (simulate_step(_small("fp8-block")).time_s[:, col]
           - simulate_step(_small("fp8")).time_s[:, col])
    np.testing.assert_allclose(got, cast_time_s(H100, weights, "fp8-block"), rtol=1e-9)
