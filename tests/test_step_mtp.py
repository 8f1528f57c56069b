"""DeepSeek-V3's MTP module in the step (moesim.step.mtp): on the last virtual stage, after
its layers, one more layer, eh_proj and a second LM-head GEMM; its parameters held there."""

from __future__ import annotations

import dataclasses

import pytest

from moesim.errors import ConfigError
from moesim.hardware import GemmShape, gemm_backward_time_s, gemm_time_s, get_gpu
from moesim.hardware.roofline import gemm_wgrad_time_s
from moesim.model import get_model
from moesim.model.accounting import mtp_module_params
from moesim.parallel.layout import ParallelLayout
from moesim.runner.specs import step_spec
from moesim.scenario import load_scenario_file, scenario_from_dict
from moesim.scenario.spec import Workload
from moesim.scenarios import resolve
from moesim.step import StepSpec
from moesim.step.plan import build_plan

LAYERS = 4  # DeepSeek-V3 cut to its 3 dense layers and one MoE layer
MODEL = dataclasses.replace(get_model("deepseek-v3"), num_layers=LAYERS,
                            moe_layers=(False, False, False, True))


def _spec(mtp: int, schedule: str = "dualpipe") -> StepSpec:
    return StepSpec(model=MODEL, layout=ParallelLayout(ep=8, dp=8, pp=2), seq_len=1024,
                    schedule=schedule, microbatches=4, compute_dtype="fp8-block",
                    recompute="none", mtp_layers=mtp)


def test_mtp_module_is_one_more_layer_eh_proj_and_head_on_the_last_stage() -> None:
    """By hand: the MTP block is plan layer 4 (a MoE layer, as DeepSeek-V3's model.layers.61)
    at the end of the last virtual stage; the head adds eh_proj (2h -> h, FP8 as the layers'
    GEMMs) and one more BF16 head GEMM, forward, backward and wgrad; the last stage holds the
    module's dense part and 1/ep of its experts."""
    base, mtp = build_plan(_spec(0)), build_plan(_spec(1))
    assert base.chunk_layers == ((0, 1), (2, 3))
    assert mtp.chunk_layers == ((0, 1), (2, 3, 4))
    assert len(mtp.layers) == 5 and mtp.layers[4].moe is not None and mtp.layers[4].index == 4
    gpu, h, tokens = get_gpu("H100"), MODEL.hidden_size, 1024
    proj = GemmShape(tokens, h, 2 * h, "fp8", 8.0)  # fp32 main_grad accumulate
    head = GemmShape(tokens, MODEL.vocab_size, h, wgrad_out_bytes=8.0)
    for got, base_s, f in ((mtp.head_fwd_s, base.head_fwd_s, gemm_time_s),
                           (mtp.head_bwd_s, base.head_bwd_s, gemm_backward_time_s),
                           (mtp.head_wgrad_s, base.head_wgrad_s, gemm_wgrad_time_s)):
        assert base_s == pytest.approx(float(f(gpu, head)), rel=1e-12)
        assert got - base_s == pytest.approx(float(f(gpu, proj) + f(gpu, head)), rel=1e-12)
    dense, experts = mtp_module_params(MODEL)
    assert mtp.dense_params == (base.dense_params[0], base.dense_params[1] + dense)
    assert mtp.expert_params == (base.expert_params[0], base.expert_params[1] + experts // 8)


def test_mtp_layers_bounded_by_the_model() -> None:
    """At most the model's own MTP modules (DeepSeek-V3 has one; Mixtral none)."""
    with pytest.raises(ConfigError) as err:
        _spec(2)
    assert err.value.field == "step.mtp_layers" and "[0, 1]" in str(err.value)
    with pytest.raises(ConfigError):
        StepSpec(model=get_model("mixtral-8x7b"), layout=ParallelLayout(ep=8, dp=8),
                 mtp_layers=1)
    with pytest.raises(ConfigError) as err:
        Workload(mtp_layers=-1)
    assert err.value.field == "workload.mtp_layers"


def test_scenario_names_the_workload_field() -> None:
    """A scenario asking for more MTP modules than its model has, or for any in mode group,
    is refused naming ``workload.mtp_layers``; the shipped DeepSeek-V3 run trains one."""
    assert step_spec(load_scenario_file(resolve("deepseek-v3-2048xh800"))).mtp_layers == 1
    base = {"version": 2, "name": "x", "model": "deepseek-v3", "hardware": {"gpu": "H800"},
            "layout": {"ep": 8, "dp": 8}, "mode": "fast", "workload": {"mtp_layers": 2}}
    with pytest.raises(ConfigError) as err:
        step_spec(scenario_from_dict(base))
    assert err.value.field == "workload.mtp_layers"
    with pytest.raises(ConfigError) as err:
        scenario_from_dict({**base, "mode": "group", "workload": {"mtp_layers": 1}})
    assert err.value.field == "workload.mtp_layers"
