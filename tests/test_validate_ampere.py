"""The FlagPerf A800 row becomes the step its README and launch script state."""

from __future__ import annotations

import pytest

from moesim.model import param_counts
from moesim.validate.ampere import AMPERE_CASES, GPT3_XL_MOE128, QWEN15_MOE_8X18B
from moesim.validate.step import bridge_spec, host_detail, simulate_bridge


def test_row_settings_reach_the_step() -> None:
    case = AMPERE_CASES[0]
    spec = bridge_spec(case)
    lay = spec.layout
    assert (lay.tp, lay.pp, lay.vpp, lay.ep, lay.dp, lay.world_size) == (1, 2, 1, 1, 4, 8)
    assert spec.microbatches * lay.dp * spec.micro_batch_size == 512 and spec.seq_len == 8192
    assert (spec.gpu, spec.compute_dtype, spec.recompute, spec.router.kind) == (
        "A800", "bf16", "selective", "uniform")
    assert spec.model is QWEN15_MOE_8X18B and spec.schedule == "1f1b"
    assert dict(spec.fabric.params) == {"hosts": 1, "gpu": "A800", "nic_gbit": 200}
    assert (case.group, case.scope, case.generation) == ("out_of_sample", "end_to_end", "Ampere")
    assert case.assumptions and "@32f1a7a7" in case.source and "@04c97573" in case.source


def test_model_matches_the_readme_mfu() -> None:
    """6 x active parameters per token at the README's 7450.7 tokens/s/GPU is its 32.95 %
    MFU of 312 TFLOP/s (the 24-layer script; the 12-layer one would give ~23 %)."""
    m = QWEN15_MOE_8X18B
    assert (m.num_layers, m.hidden_size, m.n_routed_experts, m.top_k) == (24, 2048, 8, 2)
    t = param_counts(m).per_token
    active = (t.attention + t.routed_experts + t.router + t.norms  # no input lookup: 0 FLOPs
              + t.embedding_output)
    assert 6 * active * 7450.7 / 312e12 == pytest.approx(0.3295, rel=0.03)


def test_ep1_row_simulates() -> None:
    """EP1: the all-to-all bound sees no pairs (numpy's bincount of nothing is int64; the
    bound used to fail casting it)."""
    tokens_s, result = simulate_bridge(AMPERE_CASES[0])
    assert tokens_s > 0 and result.step_time_s > 0
    # 128 micro-batches x 12 MoE layers a stage x 8 local experts (EP1) x 6 GEMMs
    assert host_detail(AMPERE_CASES[0], tokens_s, result).startswith(
        "host band (73728 expert GEMM launches): ")


def test_deepspeed_moe_settings_reach_the_step() -> None:
    case = AMPERE_CASES[1]
    spec = bridge_spec(case)
    lay = spec.layout
    assert (lay.tp, lay.pp, lay.ep, lay.dp, lay.world_size) == (1, 1, 128, 128, 128)
    assert (spec.microbatches, spec.micro_batch_size, spec.seq_len) == (1, 4, 2048)
    assert spec.microbatches * lay.dp * spec.micro_batch_size == 512
    assert (spec.gpu, spec.compute_dtype, spec.recompute, spec.router.kind) == (
        "A100", "bf16", "full", "force_balanced")
    assert dict(spec.fabric.params) == {"hosts": 16, "gpu": "A100", "nic_gbit": 200}
    assert case.published == 372 * 2048 / 128 == 5952.0  # samples/s -> tokens/s/GPU
    m = GPT3_XL_MOE128
    assert sum(m.moe_layers) == 12 and m.moe_layers[1] and not m.moe_layers[0]
    assert (m.n_routed_experts, m.top_k, m.gated_ffn) == (128, 1, False)
    # "1.3B+MoE-128 (52B)" (arXiv:2201.05596 Table 2): the count moesim makes of this shape
    assert param_counts(m).total == pytest.approx(52e9, rel=0.02)
