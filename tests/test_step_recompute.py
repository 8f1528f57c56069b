"""The step runs the activation recompute the memory plan chose for its layout."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from moesim.errors import ConfigError
from moesim.hardware import GemmShape, cast_time_s, gemm_time_s, get_gpu, memory_bound_time_s
from moesim.model import get_model
from moesim.parallel.layout import ParallelLayout
from moesim.plan.candidates import check_layout
from moesim.plan.spec import DesignSpec
from moesim.scenario.schema import FabricSpec
from moesim.step import StepSpec, run_step
from moesim.step.plan import build_plan
from moesim.step.run import simulate_step

# (model, gpu, layout, global batch): one where selective recompute fits, one that needs full
LAYOUTS = [
    ("mixtral-8x7b", "H100", ParallelLayout(pp=4, vpp=8, ep=8, dp=16), 256),
    ("mixtral-8x7b", "H100", ParallelLayout(pp=2, ep=8, dp=8), 256),
]


@pytest.mark.parametrize(("model", "gpu", "layout", "gbs"), LAYOUTS)
def test_auto_recompute_is_the_memory_plans_choice(model: str, gpu: str,
                                                   layout: ParallelLayout, gbs: int) -> None:
    """``moesim plan memory`` (check_layout) and the step's ``recompute: auto`` agree."""
    cfg = get_model(model)
    design = DesignSpec(model=model, gpus=layout.world_size, gpu=gpu, global_batch=gbs)
    cand = check_layout(design, cfg, get_gpu(gpu), layout)
    step = StepSpec(model=cfg, layout=layout, gpu=gpu, seq_len=4096,
                    microbatches=cand.num_microbatches,
                    schedule="interleaved" if layout.vpp > 1 else "1f1b")
    assert step.resolved_recompute() == cand.recompute


def test_the_two_layouts_need_different_recompute() -> None:
    chosen = set()
    for model, gpu, layout, gbs in LAYOUTS:
        design = DesignSpec(model=model, gpus=layout.world_size, gpu=gpu, global_batch=gbs)
        chosen.add(check_layout(design, get_model(model), get_gpu(gpu), layout).recompute)
    assert chosen == {"selective", "full"}


def _small(recompute: str) -> StepSpec:
    model = dataclasses.replace(get_model("mixtral-8x7b"), num_layers=2,
                                moe_layers=(True, True))
    return StepSpec(model=model, layout=ParallelLayout(ep=8, dp=8), gpu="H100",
                    seq_len=1024, microbatches=2, recompute=recompute,
                    fabric=FabricSpec(preset="hgx-h100", multipath="dmodk"))


def test_recompute_times_in_the_plan_by_hand() -> None:
    none, sel, full = (build_plan(_small(r)) for r in ("none", "selective", "full"))
    for a, s, f in zip(none.layers, sel.layers, full.layers, strict=True):
        assert a.recompute_time_s(0) == 0.0
        assert s.recompute_time_s(3) == a.core_fwd_s > 0  # the attention core forward again
        c = a.moe
        assert c is not None
        e = 5
        again = c.attn_fwd[e] + c.router[e] + c.experts_fwd[e] + c.unpermute[e]
        assert f.recompute_time_s(e) == pytest.approx(float(again))


def test_step_compute_grows_by_the_recomputed_forward() -> None:
    """Each of 2 micro-batches runs every layer's forward compute once more, on every rank
    (per-rank compute from the state's ledger; rank r is EP coordinate r here)."""
    states = {r: simulate_step(_small(r)) for r in ("none", "full")}
    plan = build_plan(_small("full"))
    extra = [2 * sum(layer.recompute_time_s(e) for layer in plan.layers) for e in range(8)]
    got = states["full"].time_s[:, 0] - states["none"].time_s[:, 0]
    np.testing.assert_allclose(got, extra, rtol=1e-9)
    runs = {r: run_step(_small(r)) for r in ("none", "full")}
    assert runs["full"].step_time_s > runs["none"].step_time_s
    assert np.isfinite(runs["full"].step_time_s)


def test_bad_recompute_is_one_config_error() -> None:
    with pytest.raises(ConfigError, match=r"step\.recompute"):
        _small("some")


def test_mla_up_proj_recompute_by_hand() -> None:
    """``mla_up_proj`` (DeepSeek-V3 report section 3.4; Megatron's recompute module): before
    each layer's backward the query (1536 -> 128 x 192) and key/value (512 -> 128 x 256)
    up-projection GEMMs run again in FP8, with their input casts, on every EP rank and in the
    dense layers too; a model without MLA is refused."""
    model = dataclasses.replace(get_model("deepseek-v3"), num_layers=2,
                                moe_layers=(False, True))
    spec = StepSpec(model=model, layout=ParallelLayout(ep=8, dp=8), gpu="H800", seq_len=1024,
                    microbatches=2, recompute="mla_up_proj", compute_dtype="fp8-block")
    gpu, m = get_gpu("H800"), 1024
    up = sum(float(gemm_time_s(gpu, GemmShape(m, n, k, "fp8")) + cast_time_s(gpu, m * k,
                                                                               "fp8-block"))
             for n, k in ((128 * 192, 1536), (128 * 256, 512)))
    plan = build_plan(spec)
    assert [layer.recompute_time_s(e) for layer in plan.layers for e in (0, 7)] == (
        pytest.approx([up] * 4, rel=1e-12))
    assert build_plan(dataclasses.replace(spec, recompute="none")).layers[1].recompute_s is None
    with pytest.raises(ConfigError, match="needs an MLA model"):
        _small("mla_up_proj")


def test_recompute_modules_add_up_by_hand() -> None:
    """A Megatron ``--recompute-modules`` list joined by ``+`` runs each module's forward again:
    ``mla_up_proj+mlp`` (the DeepSeek-V3 DGX-H100 preset's) is the up-projections on every
    layer plus the dense MLP on the dense layer only (Megatron's ``mlp`` skips MoE layers);
    ``core_attn`` is ``selective``; modules given once each, of the modelled names."""
    model = dataclasses.replace(get_model("deepseek-v3"), num_layers=2,
                                moe_layers=(False, True))
    spec = StepSpec(model=model, layout=ParallelLayout(ep=8, dp=8), gpu="H800", seq_len=1024,
                    microbatches=2, recompute="mla_up_proj", compute_dtype="fp8-block")
    up = build_plan(spec).layers[0].recompute_time_s(0)
    both = build_plan(dataclasses.replace(spec, recompute="mla_up_proj+mlp"))
    dense, moe = both.layers
    assert dense.moe is None and moe.moe is not None
    assert dense.recompute_time_s(0) == up + dense.ffn_fwd_s and dense.ffn_fwd_s > 0
    assert [moe.recompute_time_s(e) for e in range(8)] == [up] * 8
    sel, core = (build_plan(dataclasses.replace(spec, recompute=r))
                 for r in ("selective", "core_attn"))
    for a, b in zip(sel.layers, core.layers, strict=True):
        assert a.recompute_s is not None and b.recompute_s is not None
        np.testing.assert_array_equal(a.recompute_s, b.recompute_s)
    attn_mlp = build_plan(dataclasses.replace(spec, recompute="core_attn+mlp")).layers[0]
    assert attn_mlp.recompute_time_s(0) == dense.core_fwd_s + dense.ffn_fwd_s
    for bad in ("mlp+mlp", "mlp+attn", "mlp+", "full+mlp"):
        with pytest.raises(ConfigError, match=r"step\.recompute"):
            dataclasses.replace(spec, recompute=bad)
    with pytest.raises(ConfigError, match="needs an MLA model"):
        _small("core_attn+mla_up_proj")
    assert _small("core_attn+mlp").recompute == "core_attn+mlp"


def _two_layer_deepseek(recompute: str) -> StepSpec:
    """DeepSeek-V3 shrunk to a dense and a MoE layer, EP8 on H800, BF16, 1,024 tokens."""
    model = dataclasses.replace(get_model("deepseek-v3"), num_layers=2,
                                moe_layers=(False, True))
    return StepSpec(model=model, layout=ParallelLayout(ep=8, dp=8), gpu="H800", seq_len=1024,
                    microbatches=2, recompute=recompute)


def test_layernorm_and_moe_act_recompute_by_hand() -> None:
    """``layernorm``: the input and pre-MLP RMSNorms again on every layer and EP rank, each a
    kernel reading and writing 1,024 x 7,168 BF16 values; ``moe_act``: the SwiGLU again over
    the token copies each EP rank received (read 2 x 2,048 columns, write 2,048, BF16), on MoE
    layers only; listed together they add up."""
    gpu = get_gpu("H800")
    norm = 2 * float(memory_bound_time_s(gpu, 2 * 1024 * 7168 * 2))
    plan = build_plan(_two_layer_deepseek("layernorm"))
    assert [layer.recompute_time_s(e) for layer in plan.layers for e in (0, 5)] == (
        pytest.approx([norm] * 4, rel=1e-12))
    act = build_plan(_two_layer_deepseek("moe_act"))
    dense, moe = act.layers
    copies = moe.routed_copies
    assert copies is not None and copies.sum() == 1024 * 8 * 8  # top-8 of 8 ranks' tokens
    by_hand = [float(memory_bound_time_s(gpu, 3 * int(c) * 2048 * 2)) for c in copies]
    assert [moe.recompute_time_s(e) for e in range(8)] == pytest.approx(by_hand, rel=1e-12)
    assert dense.recompute_time_s(0) == 0.0
    both = build_plan(_two_layer_deepseek("layernorm+moe_act")).layers[1]
    assert [both.recompute_time_s(e) for e in range(8)] == (
        pytest.approx([norm + a for a in by_hand], rel=1e-12))


def test_shared_experts_and_moe_recompute_by_hand() -> None:
    """``shared_experts``: the shared expert's two BF16 GEMMs again (1,024 tokens, 7,168 ->
    2 x 2,048 -> 7,168) on the MoE layer; ``moe``: the whole MoE forward compute again (router,
    routed experts with the shared one at TP1, unpermute), which already holds ``moe_act`` and
    ``shared_experts``; neither touches the dense layer."""
    gpu = get_gpu("H800")
    shared = sum(float(gemm_time_s(gpu, GemmShape(1024, n, k))) for n, k in
                 ((2 * 2048, 7168), (7168, 2048)))
    dense, moe = build_plan(_two_layer_deepseek("shared_experts")).layers
    assert dense.recompute_time_s(0) == 0.0
    assert [moe.recompute_time_s(e) for e in range(8)] == pytest.approx([shared] * 8, rel=1e-12)
    whole = build_plan(_two_layer_deepseek("moe")).layers[1]
    assert whole.moe is not None
    c = whole.moe
    np.testing.assert_allclose(whole.recompute_s, c.router + c.experts_fwd + c.unpermute,
                               rtol=1e-12)
    same = build_plan(_two_layer_deepseek("moe+moe_act+shared_experts")).layers[1]
    np.testing.assert_array_equal(same.recompute_s, whole.recompute_s)
