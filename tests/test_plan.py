"""Design tool: candidates with reasons, JSON keys, a small design end to end, bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from moesim.cli.design import design as design_cmd
from moesim.cli.design import plan
from moesim.errors import ConfigError
from moesim.hardware import get_gpu
from moesim.model import get_model
from moesim.parallel.layout import ParallelLayout
from moesim.plan.bom import FAILURES_PER_GPU_DAY
from moesim.plan.candidates import check_layout, enumerate_candidates
from moesim.plan.design import DesignResult, design
from moesim.plan.report import to_markdown, to_record
from moesim.plan.spec import DesignSpec

SMALL = DesignSpec(model="mixtral-8x7b", gpus=64, gpu="H800", fabric="rail-h800-64",
                   global_batch=512, simulate_top=2)


def test_rejections_say_why() -> None:
    spec = DesignSpec(gpus=4096)
    model, gpu = get_model("moe-1t"), get_gpu("H200")
    no_fit = check_layout(spec, model, gpu, ParallelLayout(dp=4096))
    assert not no_fit.fits and "GiB per GPU" in no_fit.reason
    vpp = check_layout(spec, model, gpu, ParallelLayout(pp=2, vpp=2, dp=2048))
    assert not vpp.fits and "does not divide 61 layers" in vpp.reason
    ep = check_layout(DesignSpec(model="mixtral-8x7b", gpus=64), get_model("mixtral-8x7b"),
                      gpu, ParallelLayout(ep=16, dp=64))
    assert not ep.fits and "8 experts do not divide over ep=16" in ep.reason


def test_enumeration_has_fitting_and_rejected() -> None:
    cands = enumerate_candidates(SMALL, get_model("mixtral-8x7b"), get_gpu("H800"), 8)
    fit = [c for c in cands if c.fits]
    assert fit and len(fit) < len(cands)
    assert all(c.reason for c in cands if not c.fits)
    assert all(c.layout.world_size == 64 for c in fit)


@pytest.fixture(scope="module")
def small_result() -> DesignResult:
    return design(SMALL)


def test_small_design_record(small_result: DesignResult) -> None:
    rec = to_record(small_result)
    for key in ("total_params", "active_params", "gpus", "layout", "memory_gib_per_gpu",
                "step_time_s", "mfu", "tokens_per_s", "days_to_train", "candidates",
                "bill_of_materials"):
        assert key in rec
    assert set(rec["layout"]) == {"tp", "pp", "vpp", "ep", "etp", "cp", "dp"}
    assert set(rec["memory_gib_per_gpu"]) == {"weights", "grads", "optimizer", "activations",
                                             "buffers", "total"}
    for c in rec["candidates"]:
        assert {"layout", "fits", "reason", "memory_gib_per_gpu", "step_time_s"} <= set(c)
    assert 0 < rec["mfu"] < 1
    assert rec["tokens_per_s"] == pytest.approx(512 * 4096 / rec["step_time_s"])
    assert rec["bill_of_materials"]["hosts"] == 8
    json.dumps(rec)
    assert small_result.timings_s["total"] < 30


def test_small_design_report(small_result: DesignResult) -> None:
    text = to_markdown(small_result)
    lines = text.splitlines()
    assert "Total parameters" in lines[2] and "active" in lines[2]
    assert "--tensor-model-parallel-size" in text.splitlines()[-4]
    assert "## Bill of materials" in text


def test_failure_rate_from_llama3() -> None:
    assert pytest.approx(419 / (54 * 16384)) == FAILURES_PER_GPU_DAY


@pytest.mark.parametrize("args, field", [
    (["--model", "no-such-model"], "model"),
    (["--gpus", "8192"], "gpus"),
    (["--fabric", "nope"], "fabric"),
])
def test_bad_input_exit_2(args: list[str], field: str) -> None:
    out = CliRunner().invoke(design_cmd, args)
    assert out.exit_code == 2
    assert field in out.output


def test_bad_model_file_exit_2(tmp_path: Path) -> None:
    cfg = tmp_path / "config.json"
    cfg.write_text(json.dumps({"hidden_size": 1024}))
    out = CliRunner().invoke(design_cmd, ["--model", str(cfg)])
    assert out.exit_code == 2 and "model." in out.output


def test_bad_input_raises_config_error() -> None:
    with pytest.raises(ConfigError):
        design(DesignSpec(gpus=8192))
    with pytest.raises(ConfigError):
        DesignSpec(gpus=0)


def test_plan_commands() -> None:
    r = CliRunner()
    out = r.invoke(plan, ["accounting", "--model", "deepseek-v3"])
    assert out.exit_code == 0 and "total 671" in out.output
    out = r.invoke(plan, ["memory", "--model", "mixtral-8x7b", "--gpu", "H800", "--ep", "8",
                          "--dp", "8", "--pp", "4", "--global-batch", "64"])
    assert out.exit_code == 0 and "total" in out.output
    out = r.invoke(plan, ["memory", "--model", "mixtral-8x7b", "--ep", "3", "--dp", "3"])
    assert out.exit_code == 2


def test_small_design_skew_grows(small_result: DesignResult) -> None:
    excess = [p.step_excess_s for p in small_result.skew]
    assert excess[0] == 0.0 and excess[-1] > 0
    ratios = [p.sim.rank_ratio for p in small_result.skew]
    assert ratios[-1] > ratios[0]


def test_default_design_under_a_minute() -> None:
    """The README's main command: 1T MoE on 4096 H200; EP placement decided by the engine."""
    res = design(DesignSpec())
    assert res.timings_s["total"] < 60
    sims = {r.ep_key: r.sim for r in res.ranked if r.sim}
    inside = [s for (ep, etp, _), s in sims.items() if s and ep * etp <= res.domain]
    across = [s for (ep, etp, _), s in sims.items() if s and ep * etp > res.domain]
    assert inside and across  # both sides of the NVLink boundary were simulated
    assert res.chosen.sim is not None
    assert res.oversub[-1].step_time_s > res.oversub[0].step_time_s
