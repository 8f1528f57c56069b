"""Whole-step scenarios of the one language: loading, validation, and ``moesim run``/``step``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from moesim.cli import main
from moesim.errors import ConfigError
from moesim.runner.specs import spec_for, step_spec
from moesim.scenario import load_scenario_file, scenario_from_dict
from moesim.scenarios import resolve, scenario_names

TINY: dict[str, Any] = {
    "version": 2,
    "name": "tiny",
    "model": {"name": "tiny-moe", "hidden_size": 1024, "num_layers": 2,
              "vocab_size": 32000, "num_attention_heads": 8, "attention": "gqa",
              "num_key_value_heads": 8, "head_dim": 128, "intermediate_size": 2048,
              "n_routed_experts": 8, "moe_intermediate_size": 2048, "top_k": 2},
    "hardware": {"gpu": "H100"},
    "layout": {"pp": 2, "ep": 4, "dp": 4},
    "workload": {"global_batch": 8, "seq_len": 1024},
}


def _tiny(**workload: object) -> dict[str, Any]:
    return {**TINY, "workload": {**TINY["workload"], **workload}}


def test_shipped_step_scenarios_load() -> None:
    names = scenario_names()
    assert {"mixtral-64xh100", "kimi-1t-1024xh800"} <= set(names)
    mixtral = step_spec(load_scenario_file(resolve("mixtral-64xh100")))
    assert mixtral.microbatches == 256 // 16  # global batch / (dp x micro-batch size)
    assert (mixtral.layout.pp, mixtral.layout.vpp, mixtral.layout.ep) == (4, 8, 8)
    kimi = step_spec(load_scenario_file(resolve("kimi-1t-1024xh800")))
    assert kimi.layout.world_size == 1024 and kimi.layout.pp == 16
    assert kimi.dispatcher == "deepep"
    ds = step_spec(load_scenario_file(resolve("deepseek-v3-2048xh800")))
    assert (ds.layout.world_size, ds.layout.pp, ds.layout.ep, ds.layout.dp) == (2048, 16, 64, 128)
    assert (ds.microbatches, ds.compute_dtype, ds.dispatcher, ds.schedule) == (
        15360 // 128, "fp8-block", "deepep", "dualpipe")


def test_microbatches_follow_megatron() -> None:
    scn = scenario_from_dict(_tiny(global_batch=24, micro_batch_size=2))
    assert step_spec(scn).microbatches == 24 // (4 * 2)


@pytest.mark.parametrize(
    "change, field",
    [
        (_tiny(global_batch=6), "workload.global_batch"),  # not a multiple of dp x mbs = 4
        ({"layout": {"pp": 2, "ep": 4, "dp": 4, "zz": 1}}, "layout.zz"),
        ({"layout": {"pp": 2, "ep": 3, "dp": 4}}, "layout.ep"),
        ({"mode": "turbo"}, "mode"),
        ({"schedule": "gpipe"}, "schedule"),
        (_tiny(dp_overlap="yes"), "workload.dp_overlap"),
        ({"colour": "red"}, "scenario.colour"),
        ({"hardware": {"gpu": "Z100"}}, "gpu"),
        (_tiny(grad_reduce_dtype="fp16"), "workload.grad_reduce_dtype"),
        (_tiny(compute_dtype="fp4"), "workload.compute_dtype"),
        ({"version": 3}, "scenario.version"),
        ({"mode": "group"}, "layout.pp"),  # a pipeline is not one EP group
    ],
)
def test_bad_fields_are_named(change: dict[str, object], field: str) -> None:
    with pytest.raises(ConfigError) as err:
        spec_for(scenario_from_dict({**TINY, **change}))
    assert err.value.field.startswith(field) or field in str(err.value)


def test_cli_bad_file_is_one_line_exit_2(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(_tiny(global_batch=6)))
    res = CliRunner().invoke(main, ["step", str(bad)])
    assert res.exit_code == 2
    assert res.output.count("\n") == 1 and "workload.global_batch" in res.output


def test_cli_runs_a_small_step(tmp_path: Path) -> None:
    path = tmp_path / "tiny.yaml"
    path.write_text(yaml.safe_dump(TINY))
    res = CliRunner().invoke(main, ["step", str(path), "--json"])
    assert res.exit_code == 0, res.output
    record = json.loads(res.output)
    assert record["mode"] == "full" and record["scenario"] == "tiny"
    assert {"compute", "a2a_exposed", "tp_exposed", "bubble", "dp_exposed",
            "optimizer"} <= set(record["breakdown_s"])
    assert sum(record["breakdown_s"].values()) == pytest.approx(record["step_time_s"])
    path_record = record["critical_path"]
    assert path_record["step_time_s"] == pytest.approx(record["step_time_s"])
    assert sum(path_record["by_category_s"].values()) == pytest.approx(record["step_time_s"])
    text = CliRunner().invoke(main, ["step", str(path)])
    assert text.exit_code == 0 and "MFU" in text.output and "where the step went" in text.output
    assert "critical path" in text.output and "by stage (ms)" in text.output


def test_cli_overrides_microbatches_and_mode(tmp_path: Path) -> None:
    path = tmp_path / "tiny.yaml"
    path.write_text(yaml.safe_dump(TINY))
    res = CliRunner().invoke(main, ["step", str(path), "--json", "--mode", "fast",
                                    "--microbatches", "4"])
    assert res.exit_code == 0, res.output
    record = json.loads(res.output)
    assert record["mode"] == "fast" and record["critical_path"] is None
    bad = CliRunner().invoke(main, ["step", str(path), "--microbatches", "0"])
    assert bad.exit_code == 2 and "--microbatches" in bad.output  # the flag, as typed


def test_fp32_gradient_reduce_moves_twice_the_bytes() -> None:
    """Megatron's default reduce-scatters fp32 gradients; with --grad-reduce-in-bf16 half."""
    from moesim.step.run import simulate_step

    flows = {}
    for dtype in ("fp32", "bf16"):
        spec = step_spec(scenario_from_dict(_tiny(grad_reduce_dtype=dtype, dp_overlap=False)))
        st = simulate_step(spec)
        rings = [ring for key, ring in st.rings.items() if key[0].endswith("_rs")]
        flows[dtype] = sum(ring.chunk_bytes * len(ring.gpus) for ring in rings)
    assert flows["fp32"] == pytest.approx(2 * flows["bf16"]) and flows["bf16"] > 0


def test_fp8_compute_speeds_the_gemms_only() -> None:
    """``compute_dtype: fp8``: the layers' GEMMs run at the FP8 matmul rate (the experts' large
    grouped GEMMs by about FP8 / BF16 MAMF = 1402.6 / 794.5); the attention core and the LM
    head stay BF16."""
    from moesim.hardware import H100
    from moesim.step.plan import build_plan

    plans = {dt: build_plan(step_spec(scenario_from_dict(_tiny(compute_dtype=dt))))
             for dt in ("bf16", "fp8")}
    bf16, fp8 = plans["bf16"], plans["fp8"]
    assert fp8.head_fwd_s == bf16.head_fwd_s and fp8.head_bwd_s == bf16.head_bwd_s
    assert fp8.layers[0].core_fwd_s == bf16.layers[0].core_fwd_s
    moe = [i for i, layer in enumerate(bf16.layers) if layer.moe is not None]
    assert moe
    for i in moe:
        a, b = bf16.layers[i].moe, fp8.layers[i].moe
        assert a is not None and b is not None
        speedup = a.experts_fwd / b.experts_fwd
        assert (speedup > 1.2).all()
        assert (speedup < H100.mamf_fp8_tflops / H100.mamf_bf16_tflops + 1e-9).all()
        assert (b.attn_fwd < a.attn_fwd).all()  # projections in FP8, core unchanged
