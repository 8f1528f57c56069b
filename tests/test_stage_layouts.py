"""Custom pipeline stage layouts (Megatron's stage-split options) and the step that runs them."""

from __future__ import annotations

import dataclasses

import pytest

from moesim.errors import ConfigError
from moesim.model import get_model
from moesim.parallel.layout import ParallelLayout
from moesim.parallel.stages import parse_layout
from moesim.router import RouterConfig
from moesim.scenario.load import scenario_from_dict
from moesim.step import StepSpec, run_step, simulate_step
from moesim.step.plan import build_plan, chunk_layers

ACCOUNT = dict(account_for_embedding_in_pipeline_split=True,
               account_for_loss_in_pipeline_split=True)


def test_layout_string_as_megatron_parses_it() -> None:
    """Megatron's own examples (parse_str_to_list docstring; user guide table)."""
    assert parse_layout("Ettt|(tt|)*29,m|L") == ("Ettt", *["tt"] * 29, "m", "L")
    assert parse_layout("Et(tt|t|)*2,L") == ("Ettt", "t", "tt", "t", "L")
    assert parse_layout("E(|tt)*2,tL") == ("E", "tt", "tttL")
    assert parse_layout("E||t|L") == ("E", "", "t", "L")  # an empty stage is legal
    # user guide: DeepSeek-V3 on PP16 VPP2; virtual stage c * pp + s
    lay = ParallelLayout(pp=16, vpp=2, pipeline_model_parallel_layout="Et*3|(tt|)*29,m|L")
    counts = lay.virtual_stage_layers(61)
    assert counts[0] == 3 and counts[1:30] == (2,) * 29 and counts[30:] == (0, 0)
    assert lay.stage_layers(61) == (5,) + (4,) * 13 + (2, 2)


def test_account_for_embedding_and_loss_by_hand() -> None:
    """(94 + 2) / pp slots per stage, / vpp per virtual stage; the first virtual stage gives
    one to the embedding, the last one to the loss (Megatron get_num_layers_to_build)."""
    zoo = ParallelLayout(pp=32, vpp=3, **ACCOUNT)  # ModelZoo Qwen3-235B PP32 VPP3
    assert zoo.virtual_stage_layers(94) == (0,) + (1,) * 94 + (0,)
    assert zoo.stage_layers(94) == (2,) + (3,) * 30 + (2,)
    eight = ParallelLayout(pp=8, vpp=4, **ACCOUNT)
    assert eight.virtual_stage_layers(94) == (2,) + (3,) * 30 + (2,)
    assert ParallelLayout(pp=4, account_for_loss_in_pipeline_split=True).stage_layers(7) == (
        2, 2, 2, 1)


def test_first_and_last_stage_by_hand() -> None:
    lay = ParallelLayout(pp=8, num_layers_in_first_pipeline_stage=4,
                         num_layers_in_last_pipeline_stage=3)
    assert lay.stage_layers(61) == (4,) + (9,) * 6 + (3,)
    assert ParallelLayout(pp=4, num_layers_in_last_pipeline_stage=2).stage_layers(8) == (
        2, 2, 2, 2)
    two = ParallelLayout(pp=2, vpp=2, num_layers_in_first_pipeline_stage=2)
    assert chunk_layers(two, 6) == ((0,), (1, 2), (3,), (4, 5))
    with pytest.raises(ConfigError, match=r"layout\.vpp"):  # 9 layers do not split over 4 chunks
        ParallelLayout(pp=8, vpp=4, num_layers_in_first_pipeline_stage=4,
                       num_layers_in_last_pipeline_stage=3).stage_layers(61)


@pytest.mark.parametrize("kw, num_layers, field", [
    (dict(pp=2, pipeline_model_parallel_layout="Et|tX|L"), 3,
     "layout.pipeline_model_parallel_layout"),
    (dict(pp=2, pipeline_model_parallel_layout="tE|L"), 1, "layout.pipeline_model_parallel_layout"),
    (dict(pp=2, pipeline_model_parallel_layout="Et|tL|L"), 2,
     "layout.pipeline_model_parallel_layout"),
    (dict(pp=2, pipeline_model_parallel_layout="Et|t|L"), 2,
     "layout.pipeline_model_parallel_layout"),  # 3 stages, pp 2
    (dict(pp=2, vpp=2, pipeline_model_parallel_layout="Et|t|L"), 2,
     "layout.pipeline_model_parallel_layout"),
    (dict(pp=2, pipeline_model_parallel_layout="Em|tL"), 1,
     "layout.pipeline_model_parallel_layout"),  # MTP before a decoder layer
    (dict(pp=2, pipeline_model_parallel_layout="Et|L"), 2,
     "layout.pipeline_model_parallel_layout"),  # 1 decoder layer placed, 2 in the model
    (dict(pp=2, pipeline_model_parallel_layout="(t)*9999999|L"), 1,
     "layout.pipeline_model_parallel_layout"),
    (dict(pp=1, account_for_loss_in_pipeline_split=True), 4, "layout.pp"),
    (dict(pp=2, account_for_loss_in_pipeline_split=1), 4,
     "layout.account_for_loss_in_pipeline_split"),
    (dict(pp=4, **ACCOUNT), 4, "layout.account_for_embedding_in_pipeline_split"),
    (dict(pp=2, account_for_embedding_in_pipeline_split=True,
          num_layers_in_first_pipeline_stage=1), 4,
     "layout.account_for_embedding_in_pipeline_split"),
    (dict(pp=2, pipeline_model_parallel_layout="Et|tL", num_layers_in_first_pipeline_stage=1),
     2, "layout.pipeline_model_parallel_layout"),
    (dict(pp=4, num_layers_in_first_pipeline_stage=3), 8,
     "layout.num_layers_in_first_pipeline_stage"),
    (dict(pp=2, num_layers_in_last_pipeline_stage=-1), 8,
     "layout.num_layers_in_last_pipeline_stage"),
])
def test_bad_split_names_the_field(kw: dict[str, object], num_layers: int, field: str) -> None:
    with pytest.raises(ConfigError) as err:
        ParallelLayout(**kw).stage_layers(num_layers)  # type: ignore[arg-type]
    assert err.value.field == field
    assert "\n" not in str(err.value)


def test_megatron_flags() -> None:
    assert ParallelLayout(pp=32, vpp=3, **ACCOUNT).megatron_args(94)[-4:] == [
        "--account-for-embedding-in-pipeline-split", "--account-for-loss-in-pipeline-split",
        "--num-virtual-stages-per-pipeline-rank", "3"]
    text = "Et*3|(tt|)*29,m|L"
    assert ParallelLayout(pp=16, vpp=2, pipeline_model_parallel_layout=text).megatron_args(
        61)[-2:] == ["--pipeline-model-parallel-layout", text]


def _hand_spec(layout: ParallelLayout) -> StepSpec:
    model = dataclasses.replace(get_model("mixtral-8x7b"), num_layers=4,
                                moe_layers=(True,) * 4)
    return StepSpec(model=model, layout=layout, seq_len=1024, schedule="interleaved",
                    microbatches=4, router=RouterConfig(kind="uniform"), recompute="none")


def test_step_runs_each_virtual_stage_s_own_layers() -> None:
    """pp 2 x vpp 2 over 4 layers as "Et|tt|t|L": virtual stages 0..3 hold layers (0), (1, 2),
    (3) and none (the loss alone). Pipeline rank 0 runs virtual stages 0 and 2 (layers 0 and
    3), rank 1 runs 1 and 3 (layers 1 and 2, and the LM head): each rank's compute is, by hand,
    4 micro-batches x (its layers' forward + backward kernels + the head if it holds L)."""
    spec = _hand_spec(ParallelLayout(ep=4, dp=4, pp=2, vpp=2,
                                     pipeline_model_parallel_layout="Et|tt|t|L"))
    plan = build_plan(spec)
    assert plan.chunk_layers == ((0,), (1, 2), (3,), ())
    st = simulate_step(spec)
    for rank in range(spec.layout.world_size):
        e, stage = st.coords[rank]["ep"], st.coords[rank]["pp"]
        layers = (0, 3) if stage == 0 else (1, 2)
        per_mb = sum(float(c.attn_fwd[e] + c.router[e] + c.experts_fwd[e] + c.unpermute[e]
                           + c.experts_bwd[e] + c.attn_bwd[e])
                     for c in (plan.layers[i].moe for i in layers) if c is not None)
        head = plan.head_fwd_s + plan.head_bwd_s if stage == 1 else 0.0
        assert st.time_s[rank, 0] == pytest.approx(4 * (per_mb + head), rel=1e-12)
    full, fast = run_step(spec), run_step(spec, "fast")
    assert fast.step_time_s == pytest.approx(full.step_time_s, rel=0.05)
    # the same layers and head moved: the default split (layers 0, 1, 2, 3 one per virtual
    # stage) gives another step
    default = run_step(_hand_spec(ParallelLayout(ep=4, dp=4, pp=2, vpp=2)))
    assert default.step_time_s != pytest.approx(full.step_time_s, rel=1e-6)


def test_scenario_file_fields() -> None:
    base = {"version": 2, "mode": "fast", "model": "mixtral-8x7b",
            "layout": {"pp": 2, "vpp": 2, "ep": 8, "dp": 8,
                       "pipeline_model_parallel_layout": "Et*7|t*8|t*8|t*9L"},
            "schedule": "interleaved", "workload": {"global_batch": 32}}
    scn = scenario_from_dict(base)
    assert scn.layout.virtual_stage_layers(32) == (7, 8, 8, 9)
    bad = {**base, "layout": {**base["layout"], "pipeline_model_parallel_layout": 3}}
    with pytest.raises(ConfigError) as err:
        scenario_from_dict(bad)
    assert err.value.field == "layout.pipeline_model_parallel_layout"
