"""The Megatron-Bridge table rows become the steps the table states (no simulation here)."""

from __future__ import annotations

import pytest

from moesim.validate.bridge import BRIDGE_CASES, QWEN3_30B_A3B
from moesim.validate.step import bridge_spec


@pytest.mark.parametrize("case", BRIDGE_CASES, ids=[c.name for c in BRIDGE_CASES])
def test_row_settings_reach_the_step(case) -> None:  # type: ignore[no-untyped-def]
    a = dict(case.args)
    spec = bridge_spec(case)
    lay = dict(a["layout"])
    assert spec.layout.world_size == a["gpus"]
    for key in ("tp", "pp", "vpp", "ep", "cp"):
        assert getattr(spec.layout, key) == lay.get(key, 1)
    assert spec.microbatches * spec.layout.dp * spec.micro_batch_size == a["global_batch"]
    assert spec.seq_len == 4096 and spec.router.kind == "force_balanced"
    assert spec.compute_dtype == {"BF16": "bf16", "FP8-CS": "fp8-cs", "FP8-MX": "mxfp8",
                                  "MXFP8": "mxfp8"}[a["precision"]]
    # HybridEP where the row's own preset states it (GB200 Qwen3-30B, DSv3 B200), else DeepEP
    stated = case.gpu == "GB200" or case.name.startswith("deepseek-v3 256x B200")
    assert spec.dispatcher == ("hybridep" if stated else "deepep")
    assert (spec.dispatch_dtype, spec.combine_dtype) == ("bf16", "bf16")  # fused_a2a: BF16 x
    assert spec.gpu == case.gpu and spec.recompute == a["recompute"]
    assert (case.group, case.scope, case.path) == ("out_of_sample", "end_to_end", "fast")
    assert case.assumptions and ("@df0289c1" in case.source or "@1a2ac152" in case.source)


def test_recompute_as_the_preset_states() -> None:
    """DeepSeek-V3 on DGX-B200 (26.02): its preset's recompute_modules ['mla_up_proj'] is
    run as moesim's mla_up_proj and the preset is named; other rows: auto."""
    runs = {c.name: dict(c.args)["recompute"] for c in BRIDGE_CASES}
    dsv3 = next(c for c in BRIDGE_CASES if c.gpu == "B200" and "deepseek" in c.name)
    assert runs.pop(dsv3.name) == "mla_up_proj" and set(runs.values()) == {"auto"}
    assert any("mla_up_proj" in a and "@f0e2c37e" in a for a in dsv3.assumptions)


def test_one_case_per_system_model_and_layout() -> None:
    keys = [(c.gpu, dict(c.args)["model"], dict(c.args)["layout"]) for c in BRIDGE_CASES]
    assert len(keys) == len(set(keys)) == 9


def test_qwen3_30b_shape_from_its_config() -> None:
    m = QWEN3_30B_A3B
    assert (m.hidden_size, m.num_layers, m.n_routed_experts, m.top_k) == (2048, 48, 128, 8)
    assert (m.moe_intermediate_size, m.num_attention_heads, m.num_key_value_heads) == (768, 32, 4)
    from moesim.model import param_counts
    assert param_counts(m).total == pytest.approx(30.5e9, rel=0.005)  # model card: 30.5B
