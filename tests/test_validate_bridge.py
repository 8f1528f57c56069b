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
    # HybridEP where the row's own preset states it (GB200 Qwen3-30B, DSv3 B200), alltoall on
    # the Qwen3-235B rows (their presets / config functions), else DeepEP (the playbook's)
    stated = case.gpu == "GB200" or case.name.startswith("deepseek-v3 256x B200")
    a2a = case.name.startswith("qwen3-235b")
    assert spec.dispatcher == ("hybridep" if stated else "alltoall" if a2a else "deepep")
    assert spec.dedup is not a2a  # Megatron's alltoall: one copy per routed expert
    assert (spec.dispatch_dtype, spec.combine_dtype) == ("bf16", "bf16")  # fused_a2a: BF16 x
    assert spec.gpu == case.gpu and spec.recompute == a["recompute"]
    assert spec.grad_reduce_dtype == "bf16"  # ddp.grad_reduce_in_fp32 = False in every config
    assert any("grad_reduce_in_fp32 = False" in x for x in case.assumptions)
    # the DP reduce runs overlapped except where the config turns it off (DSv3 H100)
    assert spec.dp_overlap is not case.name.startswith("deepseek-v3 1024x H100")
    assert (case.group, case.scope, case.path) == ("out_of_sample", "end_to_end", "fast")
    assert case.assumptions and ("@df0289c1" in case.source or "@1a2ac152" in case.source)


def test_recompute_as_the_preset_states() -> None:
    """The DeepSeek-V3 rows run their presets' recompute_modules, named in the assumptions:
    DGX-B200 (26.02) ['mla_up_proj'], DGX-H100 ['mla_up_proj', 'mlp'] as mla_up_proj+mlp;
    the Qwen3 rows none (their config's recompute_granularity = None)."""
    runs = {c.name: dict(c.args)["recompute"] for c in BRIDGE_CASES}
    dsv3 = {c.gpu: c for c in BRIDGE_CASES if "deepseek" in c.name}
    assert runs.pop(dsv3["B200"].name) == "mla_up_proj"
    assert runs.pop(dsv3["H100"].name) == "mla_up_proj+mlp"
    assert set(runs.values()) == {"none"} and all(n.startswith("qwen3") for n in runs)
    assert all(any("recompute_granularity = None" in x and "@05c0c90f" in x
                   for x in c.assumptions) for c in BRIDGE_CASES if c.name in runs)
    assert any("mla_up_proj" in a and "@f0e2c37e" in a for a in dsv3["B200"].assumptions)
    assert any("['mla_up_proj', 'mlp']" in a and "@f0e2c37e" in a
               for a in dsv3["H100"].assumptions)


def test_one_case_per_system_model_and_layout() -> None:
    keys = [(c.gpu, dict(c.args)["model"], dict(c.args)["layout"]) for c in BRIDGE_CASES]
    assert len(keys) == len(set(keys)) == 9


def test_qwen3_30b_shape_from_its_config() -> None:
    m = QWEN3_30B_A3B
    assert (m.hidden_size, m.num_layers, m.n_routed_experts, m.top_k) == (2048, 48, 128, 8)
    assert (m.moe_intermediate_size, m.num_attention_heads, m.num_key_value_heads) == (768, 32, 4)
    from moesim.model import param_counts
    assert param_counts(m).total == pytest.approx(30.5e9, rel=0.005)  # model card: 30.5B


STATED_PIPELINES = {  # row -> (mtp_num_layers, pp_layout) its Megatron-Bridge sources state
    "deepseek-v3 256x B200 FP8-MX GBS4096 PP16 EP8": (1, "Et*4|(t*4|)*14tmL"),  # recipe (16, 1)
    "deepseek-v3 1024x H100 FP8-CS GBS8192 TP2 PP8 VPP4 EP64": (1, "Et|(tt|)*30mL"),  # preset
}


def test_deepseek_rows_run_the_mtp_module_and_layout_their_sources_state() -> None:
    """Both DeepSeek-V3 rows by one rule: the recipe's mtp_num_layers = 1 and the stated
    layout (the H100 preset's pp_layout; the B200 preset sets none: the recipe's (16, 1) map);
    the step runs the MTP block on the last virtual stage, where both layouts put 'm'."""
    from moesim.parallel.stages import parse_layout
    from moesim.step.mtp import with_mtp
    from moesim.step.plan import chunk_layers
    dsv3 = {c.name: c for c in BRIDGE_CASES if "deepseek" in c.name}
    assert set(dsv3) == set(STATED_PIPELINES)
    for name, (mtp, text) in STATED_PIPELINES.items():
        case = dsv3[name]
        spec = bridge_spec(case)
        assert (spec.mtp_layers, spec.layout.pipeline_model_parallel_layout) == (mtp, text)
        stages = parse_layout(text)
        assert len(stages) == spec.layout.pp * spec.layout.vpp
        assert "".join(stages[:-1]).count("m") == 0 and stages[-1].count("m") == mtp
        chunks = with_mtp(spec, chunk_layers(spec.layout, spec.model.num_layers))
        assert chunks[-1][-1] == 61 and sum(map(len, chunks)) == 61 + mtp  # MTP block = layer 61
        assert [len(c) for c in chunks] == [s.count("t") + s.count("m") for s in stages]
        stated = [a for a in case.assumptions if a.startswith("MTP and pipeline layout")]
        assert len(stated) == 1 and text in stated[0] and "@05d003fb" in stated[0]
        assert "@f0e2c37e" in stated[0]
    for case in BRIDGE_CASES:
        if case.name not in dsv3:
            spec = bridge_spec(case)
            assert (spec.mtp_layers, spec.layout.pipeline_model_parallel_layout) == (0, "")
